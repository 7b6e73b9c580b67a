"""Every tool under one set of deny rules in bypass mode, not only bash."""

from __future__ import annotations

from tests.security.corpus.model import Case, Group

TOOLS = Group(
    "every-tool",
    "bypass",
    deny=("read(secrets/**)", "edit(src/**)", "lsp", "bash(rm:*)"),
    cases=(
        Case("deny", tool="read", arguments={"file_path": "secrets/token.txt"}),
        Case("deny", tool="read", arguments={"file_path": "./secrets/../secrets/token.txt"}),
        Case("deny", tool="glob", arguments={"pattern": "*", "path": "secrets"}),
        Case("deny", tool="grep", arguments={"pattern": "TOKEN", "path": "secrets"}),
        Case("allow", tool="grep", arguments={"pattern": "TOKEN", "path": "."}),
        Case("allow", tool="glob", arguments={"pattern": "**/*.txt"}),
        Case("allow", tool="read", arguments={"file_path": "notes.txt"}),
        Case("deny", "cat secrets/token.txt"),
        Case("deny", "cp secrets/token.txt {P}"),
        Case("deny", tool="write", arguments={"file_path": "src/{P}", "content": "x"}),
        Case("allow", tool="write", arguments={"file_path": "{P}", "content": "x"}, creates=True),
        Case(
            "deny",
            tool="lsp",
            arguments={"operation": "hover", "file_path": "notes.txt", "line": 1, "character": 1},
        ),
        Case("deny", "rm {V}", tool="bash"),
        Case(
            "deny",
            tool="bash",
            arguments={"command": "rm {V}", "description": "bg", "run_in_background": True},
        ),
        Case("deny", tool="terminal_open", arguments={"command": "rm {V}"}),
        Case("deny", tool="terminal_open", arguments={"command": "bash -c 'rm {V}'"}),
        Case("allow", tool="terminal_open", arguments={}),
        Case("deny", tool="terminal_send", arguments={"terminal_id": "t1", "text": "rm {V}\n"}),
        Case("allow", tool="terminal_send", arguments={"terminal_id": "t1", "text": "r"}),
        Case(
            "deny",
            tool="terminal_send",
            arguments={"terminal_id": "t1", "text": "m {V}", "keys": ["Enter"]},
        ),
        Case("allow", tool="terminal_send", arguments={"terminal_id": "t1", "keys": ["C-u"]}),
        Case(
            "ask",
            tool="terminal_send",
            arguments={"terminal_id": "t1", "text": "rm {V}", "keys": ["Tab", "Enter"]},
        ),
        Case(
            "deny",
            tool="terminal_send",
            arguments={"terminal_id": "t1", "text": "echo ok; /bin/rm {V}\n"},
        ),
    ),
)
