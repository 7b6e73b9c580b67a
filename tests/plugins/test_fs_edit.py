"""write, edit and multi_edit on real files: the observed-file rules, exact matching,
line endings, atomicity, and what ``describe`` tells the permission policy."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from dsh.tools import ToolError
from dsh_plugins.fs.files import UMASK
from tests.plugins.fs_harness import Fs, change_externally


@pytest.fixture
def fs(tmp_path: Path) -> Fs:
    return Fs(tmp_path)


APP = "def main():\n    print('hello')\n    return 0\n"


async def read(fs: Fs, path: str, session: str | None = None) -> None:
    await fs.call("read", session, file_path=path, limit=1)


async def test_write_creates_a_file_and_its_folders_unread(fs: Fs) -> None:
    output = await fs.call("write", file_path="pkg/sub/new.py", content="a = 1\nb = 2\n")
    path = fs.cwd / "pkg" / "sub" / "new.py"
    assert path.read_text() == "a = 1\nb = 2\n"
    assert output.content == (
        "<path>pkg/sub/new.py</path>\n<type>file</type>\n<content>\n"
        "Created file (2 lines).\n</content>"
    )
    assert output.meta["path"] == "pkg/sub/new.py"
    assert output.meta["diff"] == (
        "--- /dev/null\n+++ b/pkg/sub/new.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n"
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~UMASK
    assert [p.name for p in path.parent.iterdir()] == ["new.py"]  # no temporary left


async def test_write_over_an_unread_file_is_refused(fs: Fs) -> None:
    path = fs.file("app.py", APP)
    message = await fs.fails("write", "FS_NOT_OBSERVED", file_path="app.py", content="x\n")
    assert message.startswith("app.py already exists and you have not read it in this session.")
    assert "Read it first" in message
    assert path.read_text() == APP


async def test_write_replaces_a_read_file_keeping_its_mode(fs: Fs) -> None:
    path = fs.file("run.sh", "#!/bin/sh\necho hi\n")
    path.chmod(0o751)
    await read(fs, "run.sh")
    output = await fs.call("write", file_path="run.sh", content="#!/bin/sh\necho bye\n")
    assert path.read_text() == "#!/bin/sh\necho bye\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert "Updated file (+1 -1)." in output.content
    assert output.meta["diff"] == (
        "--- a/run.sh\n+++ b/run.sh\n@@ -1,2 +1,2 @@\n #!/bin/sh\n-echo hi\n+echo bye\n"
    )
    # Its own write does not make the file stale for the next call.
    await fs.call("write", file_path="run.sh", content="#!/bin/sh\n")
    assert path.read_text() == "#!/bin/sh\n"


async def test_a_file_read_as_missing_but_created_since_is_stale(fs: Fs) -> None:
    await fs.fails("read", "FS_NOT_FOUND", file_path="later.txt")
    fs.file("later.txt", "someone else's\n")
    await fs.fails("write", "FS_NOT_OBSERVED", file_path="later.txt", content="mine\n")
    await fs.fails(
        "edit", "FS_STALE_VERSION", file_path="later.txt", old_string="else", new_string="x"
    )


async def test_edit_before_any_read_is_refused(fs: Fs) -> None:
    path = fs.file("app.py", APP)
    message = await fs.fails(
        "edit", "FS_NOT_OBSERVED", file_path="app.py", old_string="hello", new_string="bye"
    )
    assert (
        message == "you have not read app.py in this session. Read it first, then retry the edit."
    )
    assert path.read_text() == APP
    message = await fs.fails(
        "edit", "FS_NOT_FOUND", file_path="ghost.py", old_string="a", new_string="b"
    )
    assert message == "ghost.py does not exist; use write to create it."


async def test_edit_after_an_external_change_is_stale(fs: Fs) -> None:
    path = fs.file("app.py", APP)
    await read(fs, "app.py")
    change_externally(path, APP.replace("hello", "howdy").encode())
    message = await fs.fails(
        "edit", "FS_STALE_VERSION", file_path="app.py", old_string="howdy", new_string="bye"
    )
    assert "app.py has changed since you last read it" in message
    assert "Read it again" in message
    await fs.fails("write", "FS_STALE_VERSION", file_path="app.py", content="x\n")

    await read(fs, "app.py")
    await fs.call("edit", file_path="app.py", old_string="howdy", new_string="bye")
    assert "print('bye')" in path.read_text()


async def test_a_deleted_file_is_stale(fs: Fs) -> None:
    path = fs.file("app.py", APP)
    await read(fs, "app.py")
    path.unlink()
    message = await fs.fails(
        "edit", "FS_STALE_VERSION", file_path="app.py", old_string="hello", new_string="x"
    )
    assert "app.py was deleted since you last read it" in message


async def test_observations_belong_to_their_session(fs: Fs) -> None:
    fs.file("app.py", APP)
    await read(fs, "app.py", session="first")
    await fs.fails(
        "edit",
        "FS_NOT_OBSERVED",
        session="second",
        file_path="app.py",
        old_string="hello",
        new_string="bye",
    )
    await fs.call("edit", session="first", file_path="app.py", old_string="hello", new_string="bye")
    # The second session reads the new version and edits; the first is now behind.
    await read(fs, "app.py", session="second")
    await fs.call("edit", session="second", file_path="app.py", old_string="bye", new_string="yo")
    await fs.fails(
        "edit",
        "FS_STALE_VERSION",
        session="first",
        file_path="app.py",
        old_string="yo",
        new_string="hi",
    )


async def test_edit_replaces_one_exact_match(fs: Fs) -> None:
    path = fs.file("app.py", APP)
    await read(fs, "app.py")
    output = await fs.call(
        "edit",
        file_path="app.py",
        old_string="    return 0\n",
        new_string="    log()\n    return 1\n",
    )
    assert output.content == "Edited app.py (+2 -1): replaced 1 occurrence."
    assert path.read_text() == "def main():\n    print('hello')\n    log()\n    return 1\n"
    assert output.meta["diff"].startswith("--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,4 @@\n")
    # The recorded version is the new one: a second edit needs no read.
    await fs.call("edit", file_path="app.py", old_string="log()", new_string="trace()")
    assert "trace()" in path.read_text()


async def test_ambiguous_edits_and_replace_all(fs: Fs) -> None:
    path = fs.file("names.txt", "foo bar\nfoo baz\nqux foo\n")
    await read(fs, "names.txt")
    message = await fs.fails(
        "edit", "FS_AMBIGUOUS_EDIT", file_path="names.txt", old_string="foo", new_string="x"
    )
    assert message.startswith("old_string occurs 3 times in names.txt.")
    assert "replace_all" in message
    output = await fs.call(
        "edit", file_path="names.txt", old_string="foo", new_string="x", replace_all=True
    )
    assert output.content == "Edited names.txt (+3 -3): replaced 3 occurrences."
    assert path.read_text() == "x bar\nx baz\nqux x\n"


async def test_no_match_explains_why(fs: Fs) -> None:
    fs.file("app.py", APP)
    await read(fs, "app.py")
    message = await fs.fails(
        "edit", "FS_EDIT_NOT_FOUND", file_path="app.py", old_string="goodbye", new_string="x"
    )
    assert message.startswith("old_string was not found in app.py.")
    assert message.endswith("Nothing was changed.")
    prefixed = await fs.fails(
        "edit",
        "FS_EDIT_NOT_FOUND",
        file_path="app.py",
        old_string="2:     print('hello')",
        new_string="x",
    )
    assert "line-number prefixes" in prefixed
    spaced = await fs.fails(
        "edit",
        "FS_EDIT_NOT_FOUND",
        file_path="app.py",
        old_string="def main():\n  print('hello')",
        new_string="x",
    )
    assert "whitespace or indentation differs" in spaced


async def test_crlf_files_keep_crlf(fs: Fs) -> None:
    path = fs.file("win.txt", b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    await read(fs, "win.txt")
    output = await fs.call(
        "edit", file_path="win.txt", old_string="one\ntwo\n", new_string="one\n1.5\ntwo\n"
    )
    assert path.read_bytes() == b"\xef\xbb\xbfone\r\n1.5\r\ntwo\r\nthree\r\n"
    assert "\r" not in output.meta["diff"]
    # old_string sent with CRLF matches too.
    await fs.call("edit", file_path="win.txt", old_string="1.5\r\n", new_string="")
    assert path.read_bytes() == b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n"


async def test_lf_files_stay_lf(fs: Fs) -> None:
    path = fs.file("unix.txt", "a\nb\n")
    await read(fs, "unix.txt")
    await fs.call("edit", file_path="unix.txt", old_string="a\n", new_string="a\r\nz\r\n")
    assert path.read_bytes() == b"a\nz\nb\n"


async def test_multi_edit_applies_in_order(fs: Fs) -> None:
    path = fs.file("app.py", APP)
    await read(fs, "app.py")
    output = await fs.call(
        "multi_edit",
        file_path="app.py",
        edits=[
            {"old_string": "hello", "new_string": "hello, world"},
            {"old_string": "hello, world", "new_string": "bonjour"},
            {"old_string": "0", "new_string": "7", "replace_all": True},
        ],
    )
    assert path.read_text() == "def main():\n    print('bonjour')\n    return 7\n"
    assert output.content == "Edited app.py (+2 -2): applied 3 edits, replacing 3 occurrences."


async def test_multi_edit_is_all_or_nothing(fs: Fs) -> None:
    path = fs.file("app.py", APP)
    await read(fs, "app.py")
    before = path.stat()
    message = await fs.fails(
        "multi_edit",
        "FS_EDIT_NOT_FOUND",
        file_path="app.py",
        edits=[
            {"old_string": "hello", "new_string": "bye"},
            {"old_string": "missing", "new_string": "x"},
        ],
    )
    assert message.startswith("edit 2 of 2: old_string was not found in app.py.")
    after = path.stat()
    assert path.read_text() == APP
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # Nothing was recorded either: the read still stands.
    await fs.call("edit", file_path="app.py", old_string="hello", new_string="bye")


async def test_concurrent_edits_to_one_file_both_land(fs: Fs) -> None:
    path = fs.file("list.txt", "".join(f"item {n}\n" for n in range(20)))
    await read(fs, "list.txt")
    await asyncio.gather(
        *(
            fs.call(
                "edit", file_path="list.txt", old_string=f"item {n}\n", new_string=f"done {n}\n"
            )
            for n in range(20)
        )
    )
    assert path.read_text() == "".join(f"done {n}\n" for n in range(20))


async def test_binary_and_oversized_files_are_not_edited(fs: Fs) -> None:
    fs.file("blob.bin", b"abc\x00def")
    await fs.fails("read", "FS_NOT_TEXT", file_path="blob.bin")
    await fs.fails("edit", "FS_NOT_TEXT", file_path="blob.bin", old_string="abc", new_string="x")
    # Having seen that it is binary, the model may still replace it whole.
    action = await fs.describe("write", file_path="blob.bin", content="text now\n")
    assert action.summary == "write blob.bin (+1 -0, replacing a binary file)"
    output = await fs.call("write", file_path="blob.bin", content="text now\n")
    assert "Updated file" in output.content

    fs.file("huge.txt", b"line\n" * 2_400_000)
    await read(fs, "huge.txt")
    message = await fs.fails(
        "edit", "FS_TOO_LARGE", file_path="huge.txt", old_string="line", new_string="x"
    )
    assert message.startswith("huge.txt is 11.4 MiB, more than the 10.0 MiB that edit handles")
    action = await fs.describe("write", file_path="huge.txt", content="short\n")
    assert action.summary == "write huge.txt (+1 -0, replacing a file of 11.4 MiB)"


async def test_a_parent_that_is_a_file(fs: Fs) -> None:
    fs.file("plain", "x")
    await fs.fails("write", "FS_NOT_DIRECTORY", file_path="plain/child.txt", content="y")


async def test_describe_shows_the_diff_without_writing(fs: Fs) -> None:
    path = fs.file("src/app.py", APP)
    await read(fs, "src/app.py")
    action = await fs.describe(
        "edit", file_path="src/app.py", old_string="return 0", new_string="return 1"
    )
    assert action.risk == "write"
    assert action.summary == "edit src/app.py (+1 -1)"
    assert action.paths == (path,)
    assert action.details == (
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,3 +1,3 @@\n def main():\n"
        "     print('hello')\n-    return 0\n+    return 1\n"
    )
    assert path.read_text() == APP

    created = await fs.describe("write", file_path="src/new.py", content="a\nb")
    assert created.summary == "create src/new.py (+2)"
    assert created.details is not None
    assert created.details.endswith("+b\n\\ No newline at end of file\n")
    assert not (fs.cwd / "src" / "new.py").exists()

    multi = await fs.describe(
        "multi_edit",
        file_path="src/app.py",
        edits=[
            {"old_string": "hello", "new_string": "hi"},
            {"old_string": "main", "new_string": "run"},
        ],
    )
    assert multi.summary == "edit src/app.py (+2 -2)"


async def test_describe_refuses_what_execute_would_refuse(fs: Fs) -> None:
    fs.file("app.py", APP)
    with pytest.raises(ToolError) as caught:
        await fs.describe("edit", file_path="app.py", old_string="hello", new_string="x")
    assert caught.value.code == "FS_NOT_OBSERVED"


async def test_a_symlink_out_of_the_workspace_names_its_real_target(fs: Fs) -> None:
    outside = fs.root / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("token = 1\n")
    link = fs.cwd / "link.txt"
    link.symlink_to(secret)

    await read(fs, "link.txt")
    action = await fs.describe("edit", file_path="link.txt", old_string="1", new_string="2")
    assert action.paths == (secret,)
    assert action.summary == f"edit link.txt -> {secret} (+1 -1)"

    write = await fs.describe("write", file_path="link.txt", content="token = 3\n")
    assert write.paths == (secret,)

    await fs.call("edit", file_path="link.txt", old_string="1", new_string="2")
    assert link.is_symlink()
    assert secret.read_text() == "token = 2\n"


async def test_a_symlinked_folder_resolves_too(fs: Fs) -> None:
    outside = fs.root / "vendor"
    outside.mkdir()
    (fs.cwd / "vendor").symlink_to(outside)
    action = await fs.describe("write", file_path="vendor/lib.py", content="x = 1\n")
    assert action.paths == (outside / "lib.py",)
    await fs.call("write", file_path="vendor/lib.py", content="x = 1\n")
    assert (outside / "lib.py").read_text() == "x = 1\n"


async def test_argument_checks(fs: Fs) -> None:
    with pytest.raises(ValueError, match="old_string and new_string are the same"):
        fs.arguments("edit", {"file_path": "a", "old_string": "x", "new_string": "x"})
    with pytest.raises(ValueError, match="old_string must not be empty"):
        fs.arguments("edit", {"file_path": "a", "old_string": "", "new_string": "x"})
    with pytest.raises(ValueError, match="edit 2: old_string and new_string are the same"):
        fs.arguments(
            "multi_edit",
            {
                "file_path": "a",
                "edits": [
                    {"old_string": "a", "new_string": "b"},
                    {"old_string": "c", "new_string": "c"},
                ],
            },
        )
    with pytest.raises(ValueError, match="edits must hold at least one edit"):
        fs.arguments("multi_edit", {"file_path": "a", "edits": []})
    schema = fs.tools["multi_edit"].schema.parameters
    assert "$defs" not in schema
    assert "$ref" not in str(schema)
    item = schema["properties"]["edits"]["items"]
    assert item["required"] == ["old_string", "new_string"]
    assert set(item["properties"]) == {"old_string", "new_string", "replace_all"}
    for name in ("write", "edit", "multi_edit"):
        tool = fs.tools[name]
        assert (tool.kind, tool.read_only, tool.describe is not None) == ("edit", False, True)


async def test_writes_are_atomic_renames(fs: Fs) -> None:
    path = fs.file("app.py", APP)
    await read(fs, "app.py")
    inode = path.stat().st_ino
    handle = path.open()  # a reader mid-way keeps the old content
    await fs.call("write", file_path="app.py", content="new\n")
    assert handle.read() == APP
    handle.close()
    assert path.stat().st_ino != inode
    assert sorted(os.listdir(fs.cwd)) == ["app.py"]
