"""What a replay file leaves out: secrets (the credential store's, the settings'
secret-looking values, headers and env) and the user's folders; and a value cut across
two streamed deltas is still found whole."""

from __future__ import annotations

import json
from pathlib import Path

from dsh.llm import SessionId, TextDelta, user_text
from dsh.replay.export import build_replay_file, known_secrets, settings_secrets
from dsh.session import AssistantChunk, Session, SessionHeader

SETTINGS = """
[mcp.servers.tracker]
url = "https://tracker.example/mcp"
[mcp.servers.tracker.headers]
Authorization = "Bearer tracker-token-123"
[mcp.servers.local]
command = "serve"
env = { API_MODE = "production-mode-x" }
[plugins.web]
api_key = "web-key-abcdef"
[agent]
model = "deepseek-flash"
"""


def test_the_settings_secret_values_are_found() -> None:
    found = set(settings_secrets(SETTINGS))
    assert found == {"Bearer tracker-token-123", "production-mode-x", "web-key-abcdef"}
    assert settings_secrets("not = [toml") == []


def test_the_credential_files_values_are_secrets(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (home / "credentials.json").write_text(json.dumps({"DEEPSEEK_API_KEY": "sk-from-file-1"}))
    (home / "credentials.json").chmod(0o600)
    (home / ".env").write_text("OTHER_TOKEN=from-home-env-2\n")
    assert {"sk-from-file-1", "from-home-env-2"} <= set(known_secrets(home, project))


def test_secrets_and_folders_are_replaced_even_across_deltas(tmp_path: Path) -> None:
    cwd = tmp_path / "project"
    header = SessionHeader(id=SessionId("s1"), created_at=1, cwd=str(cwd))
    session = Session(header)
    session.append("user/message", user_text(f"my key sk-secret-998877 in {cwd}/a.py"))
    for piece in (
        "the key is sk-sec",
        "ret-998877 and the file ",
        f"{str(cwd)[:6]}",
        f"{str(cwd)[6:]}/a.py",
    ):
        session.append(
            "assistant/chunk",
            AssistantChunk(turn=1, step=1, chunk=TextDelta(index=0, text=piece)),
        )
    text = build_replay_file(
        header,
        session.events,
        workspace={"a.py": b"print(1)\n", "blob.bin": b"\xff\x00"},
        secrets=["sk-secret-998877", "short"],
        home=str(tmp_path),
        settings=SETTINGS,
    )
    assert "sk-secret-998877" not in text
    assert str(tmp_path) not in text
    document = json.loads(text)
    assert document["session"]["header"]["cwd"] == "<dsh:cwd>"
    events = document["session"]["events"]
    assert events[0]["data"]["content"][0]["text"] == "my key [secret] in <dsh:cwd>/a.py"
    deltas = [e["data"]["chunk"]["text"] for e in events[1:]]
    assert deltas == ["the key is [secret] and the file <dsh:cwd>/a.py", "", "", ""]
    assert document["workspace"] == {"a.py": {"text": "print(1)\n"}, "blob.bin": {"base64": "/wA="}}
    for value in settings_secrets(SETTINGS):
        assert value not in text
    assert 'Authorization = \\"[secret]\\"' in text
    assert "deepseek-flash" in text  # what is no secret stays
