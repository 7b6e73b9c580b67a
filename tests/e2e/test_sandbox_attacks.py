"""The sandbox against commands the rules let through (issue 37).

Every attack runs the real ``dsh -p`` against the scripted server, under the default
sandbox policy, with the command allowed by a rule in the user's own settings
(``bash(python3:*)``) so that the permission engine lets it run: what is checked is
what the sandbox stops, not what the rules refuse. The attacks live in small Python
scripts in the project, whose contents no rule reads, so spellings the command
analysis would refuse on sight (``/proc/<pid>/environ``, ``$DSH_HOME``) reach the
kernel. Each test checks the effect, not the tool result's wording: the file on disk
unchanged or absent, the secret in no request the scripted server received, the
outside server without a connection.

The controls: under ``--sandbox off`` the same scripts do write ``~/.bashrc``, read
dsh's environment and reach the outside server, so the checks can see an effect
when there is one; and the honest writes (the project, ``/tmp``) still work.
"""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import TIMEOUT, Dsh, Finished, close_stdin, finish, send
from tests.e2e.sandboxed import installation_outside_tmp

KEY = "sk-provider-canary-5f0c11ab"
OTHER_SECRET = ("STRIPE_SECRET", "stripe-canary-e7d2")
DSH_MARKER = ("DSH_SANDBOX_CANARY", "dsh-environment-canary-93be")
"""A variable only dsh's own environment holds: dsh does not take ``DSH_*`` variables
out of its environment block (they are its settings) and hands none to commands, so a
command that finds it read another process's ``/proc/<pid>/environ``."""
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-canary-0c4f\n"
AWS = "[default]\naws_secret_access_key = aws-canary-77d1\n"
CREDENTIALS = '{"deepseek": "sk-stored-canary-41aa"}\n'
BASHRC = "# the user's own\nexport EDITOR=vi\n"
PWNED = "echo PWNED\n"

ALLOW_PYTHON = '\n[permissions]\nallow = ["bash(python3:*)"]\n'


@pytest.fixture
async def dsh(fake_llm: FakeLLM) -> AsyncIterator[Dsh]:
    """An installation outside ``/tmp`` (tests/e2e/sandboxed.py) with a home folder of
    the test's own holding secret stores, the provider key and a marker in dsh's
    environment, and python3 allowed by the user's own rule."""
    async with installation_outside_tmp(fake_llm) as installation:
        plant_secrets(installation)
        yield installation


def plant_secrets(dsh: Dsh) -> None:
    home = dsh.root / "userhome"
    (home / ".bashrc").write_text(BASHRC)
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh/id_rsa").write_text(SSH_KEY)
    (home / ".aws").mkdir()
    (home / ".aws/credentials").write_text(AWS)
    (dsh.home / "credentials.json").write_text(CREDENTIALS)
    settings = dsh.home / "settings.toml"
    settings.write_text(settings.read_text() + ALLOW_PYTHON)
    dsh.key = KEY
    dsh.environment.update([OTHER_SECRET, DSH_MARKER])


@pytest.fixture
async def project(dsh: Dsh) -> Path:
    """The project, a git repository with a settings folder of its own."""
    git = await asyncio.create_subprocess_exec(
        "git", "init", "-q", str(dsh.project), stdout=asyncio.subprocess.DEVNULL
    )
    assert await asyncio.wait_for(git.wait(), TIMEOUT) == 0
    (dsh.project / ".dsh").mkdir()
    (dsh.project / ".dsh/settings.toml").write_text("# the project's own\n")
    return dsh.project


class Listener:
    """A TCP server on 127.0.0.1, outside any sandbox, counting who connects."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.write(b"hello from outside\n")
        await writer.drain()
        writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    listening = Listener()
    listening.server = await asyncio.start_server(listening._accepted, "127.0.0.1", 0)
    try:
        yield listening
    finally:
        listening.server.close()
        await listening.server.wait_closed()


def script(project: Path, name: str, body: str) -> Reply:
    """Plant ``name.py`` in the project; the reply is the model running it."""
    (project / f"{name}.py").write_text(textwrap.dedent(body))
    return bash(f"python3 {name}.py")


def bash(command: str) -> Reply:
    call = ToolCallSpec(name="bash", arguments={"command": command, "description": "run"})
    return Reply(tool_calls=[call])


def tool_texts(server: FakeLLM) -> list[str]:
    """What the model was told of each tool call, from the last request it got."""
    body = server.chat_requests[-1].body
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def sent_anywhere(server: FakeLLM, secret: str) -> bool:
    return any(secret.encode() in request.raw for request in server.requests)


WRITE = """\
    import sys
    try:
        with open({path!r}, "a") as handle:
            handle.write({text!r})
        print("written")
    except OSError as error:
        print("refused:", type(error).__name__, error.strerror)
"""


def write_attack(project: Path, name: str, path: Path | str, text: str = PWNED) -> Reply:
    return script(project, name, WRITE.format(path=str(path), text=text))


READ = """\
    try:
        print(open({path!r}).read())
    except OSError as error:
        print("refused:", type(error).__name__, error.strerror)
"""


def read_attack(project: Path, name: str, path: Path | str) -> Reply:
    return script(project, name, READ.format(path=str(path)))


ENVIRONS = """\
    import os
    found = []
    for pid in [{dsh_pid}, os.getppid()] + [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            found.append(open(f"/proc/{{pid}}/environ", "rb").read().decode(errors="replace"))
        except OSError as error:
            found.append(f"{{pid}}: {{type(error).__name__}}")
    print("\\n".join(found).replace("\\0", "\\n"))
"""
"""Every process environment the command can read: dsh's (its pid as the test knows
it), its parent's, and each one ``/proc`` lists."""

CONNECT = """\
    import socket
    try:
        with socket.create_connection(("127.0.0.1", {port}), timeout=10) as sock:
            print("connected:", sock.recv(100))
    except OSError as error:
        print("refused:", type(error).__name__, error.strerror)
"""


async def run_prompted(
    dsh: Dsh, fake_llm: FakeLLM, plant: Callable[[int], list[Reply]], *args: str
) -> Finished:
    """Run ``dsh -p ARGS`` over stream-json input, planting the scripts once dsh's pid
    is known (``plant(pid)`` returns the model's replies) and only then prompting."""
    child = await dsh.start("-p", "--input-format", "stream-json", *args)
    fake_llm.add(*plant(child.pid), Reply(text="Done."))
    await send(child, {"type": "prompt", "text": "go"})
    await close_stdin(child)
    return await finish(child, stdin=None)


# ------------------------------------------------------------------ writes


async def test_writes_outside_the_workspace_are_refused(
    dsh: Dsh, fake_llm: FakeLLM, project: Path
) -> None:
    home = dsh.root / "userhome"
    git_config = (project / ".git/config").read_text()
    user_settings = (dsh.home / "settings.toml").read_text()
    fake_llm.add(
        write_attack(project, "bashrc", home / ".bashrc"),
        write_attack(project, "hook", project / ".git/hooks/pre-commit", "#!/bin/sh\ntouch X\n"),
        write_attack(project, "gitconfig", project / ".git/config", "[core]\nfsmonitor = x\n"),
        write_attack(project, "projectsettings", project / ".dsh/settings.toml", "x = 1\n"),
        write_attack(project, "usersettings", dsh.home / "settings.toml", "x = 1\n"),
        write_attack(project, "honest", project / "notes.txt", "an ordinary file\n"),  # control
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "set things up")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert (home / ".bashrc").read_text() == BASHRC, texts[0]
    assert not (project / ".git/hooks/pre-commit").exists(), texts[1]
    assert (project / ".git/config").read_text() == git_config, texts[2]
    assert (project / ".dsh/settings.toml").read_text() == "# the project's own\n", texts[3]
    assert (dsh.home / "settings.toml").read_text() == user_settings, texts[4]
    attacks = ["~/.bashrc", "pre-commit", ".git/config", ".dsh/settings.toml", "$DSH_HOME"]
    for attack, text in zip(attacks, texts, strict=False):
        assert "refused:" in text, (attack, text)  # and the model is told so
    assert (project / "notes.txt").read_text() == "an ordinary file\n", texts[5]


async def test_bypass_mode_spelled_plainly_writes_no_protected_file(
    dsh: Dsh, fake_llm: FakeLLM, project: Path
) -> None:
    """The same writes as commands a person would type, run by ``bypass`` mode, which
    lets protected paths through: only the sandbox stands in the way."""
    home = dsh.root / "userhome"
    git_config = (project / ".git/config").read_text()
    fake_llm.add(
        bash("printf 'echo PWNED\\n' >> ~/.bashrc"),
        bash("printf '#!/bin/sh\\ntouch X\\n' > .git/hooks/pre-commit"),
        bash("printf '[core]\\n\\tfsmonitor = x\\n' >> .git/config"),
        bash("echo 'x = 1' >> .dsh/settings.toml"),
        bash("echo honest > notes.txt"),  # the control
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "set things up", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert (home / ".bashrc").read_text() == BASHRC, texts[0]
    assert not (project / ".git/hooks/pre-commit").exists(), texts[1]
    assert (project / ".git/config").read_text() == git_config, texts[2]
    assert (project / ".dsh/settings.toml").read_text() == "# the project's own\n", texts[3]
    assert (project / "notes.txt").read_text() == "honest\n", texts[4]


# ------------------------------------------------------------------ reads


async def test_secret_stores_and_other_processes_are_out_of_sight(
    dsh: Dsh, fake_llm: FakeLLM, project: Path
) -> None:
    home = dsh.root / "userhome"

    def plant(pid: int) -> list[Reply]:
        return [
            read_attack(project, "ssh", home / ".ssh/id_rsa"),
            read_attack(project, "aws", home / ".aws/credentials"),
            read_attack(project, "stored", dsh.home / "credentials.json"),
            script(project, "environs", ENVIRONS.format(dsh_pid=pid)),
        ]

    done = await run_prompted(dsh, fake_llm, plant)

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    for secret in ("ssh-canary-0c4f", "aws-canary-77d1", "sk-stored-canary-41aa", KEY):
        assert not sent_anywhere(fake_llm, secret), (secret, texts)
    assert not sent_anywhere(fake_llm, DSH_MARKER[1]), texts[3]
    for text in texts[:3]:
        assert "refused:" in text, texts
    # The command reads its own environment: /proc is there, dsh's process is not.
    assert "PATH=" in texts[3], texts[3]


async def test_commands_get_no_key_in_their_environment(
    dsh: Dsh, fake_llm: FakeLLM, project: Path
) -> None:
    fake_llm.add(
        script(project, "env", "import os\nfor item in os.environ.items(): print(*item)\n"),
        bash("env"),
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "show the environment", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert not sent_anywhere(fake_llm, KEY)
    assert not sent_anywhere(fake_llm, OTHER_SECRET[1])
    assert not sent_anywhere(fake_llm, DSH_MARKER[1])
    assert "PATH " in texts[0], texts[0]  # the environment is printed: not vacuous
    assert "PATH=" in texts[1], texts[1]
    assert fake_llm.chat_requests[0].headers["authorization"] == f"Bearer {KEY}"


# ------------------------------------------------------------------ network


async def test_a_server_outside_is_out_of_reach(
    dsh: Dsh, fake_llm: FakeLLM, project: Path, listener: Listener
) -> None:
    fake_llm.add(
        script(project, "connect", CONNECT.format(port=listener.port)),
        bash(f"curl -sS --max-time 10 http://127.0.0.1:{listener.port}/"),
        Reply(text="Done."),
    )

    done = await dsh.run("-p", "call home", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert listener.connections == 0, texts
    assert "refused:" in texts[0], texts[0]
    assert "hello from outside" not in "".join(texts)


# ------------------------------------------------------------------ policies


@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "trusted"])
async def test_a_projects_settings_cannot_turn_the_sandbox_off(
    dsh: Dsh, fake_llm: FakeLLM, project: Path, trusted: bool
) -> None:
    (project / ".dsh/settings.toml").write_text('[sandbox]\npolicy = "off"\n')
    home = dsh.root / "userhome"
    fake_llm.add(write_attack(project, "bashrc", home / ".bashrc"), Reply(text="Done."))

    done = await dsh.run("-p", "set things up", *(["--trust"] if trusted else []))

    assert done.code == 0, done.stderr
    [text] = tool_texts(fake_llm)
    assert (home / ".bashrc").read_text() == BASHRC, text
    assert "refused:" in text, text


async def test_read_only_refuses_writes_in_the_project_and_keeps_tmp(
    dsh: Dsh, fake_llm: FakeLLM, project: Path, scratch: str
) -> None:
    fake_llm.add(
        write_attack(project, "inside", project / "notes.txt", "an ordinary file\n"),
        bash(f"echo scratch-works > {scratch} && cat {scratch}"),
        Reply(text="Done."),
    )

    done = await dsh.run(
        "-p", "take notes", "--sandbox", "read-only", "--permission-mode", "bypass"
    )

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert not (project / "notes.txt").exists(), texts[0]
    assert "refused:" in texts[0], texts[0]
    assert "scratch-works" in texts[1], texts[1]
    # The temporary folder is the sandbox's own, not the machine's /tmp.
    assert not Path(scratch).exists()


async def test_off_is_the_control_every_attack_lands(
    dsh: Dsh, fake_llm: FakeLLM, project: Path, listener: Listener
) -> None:
    """Without the sandbox the same scripts write ``~/.bashrc``, read dsh's
    environment and reach the outside server: the checks above can see an effect."""
    home = dsh.root / "userhome"

    def plant(pid: int) -> list[Reply]:
        return [
            write_attack(project, "bashrc", home / ".bashrc"),
            script(project, "environs", ENVIRONS.format(dsh_pid=pid)),
            script(project, "connect", CONNECT.format(port=listener.port)),
        ]

    done = await run_prompted(dsh, fake_llm, plant, "--sandbox", "off")

    assert done.code == 0, done.stderr
    texts = tool_texts(fake_llm)
    assert (home / ".bashrc").read_text() == BASHRC + PWNED, texts[0]
    assert sent_anywhere(fake_llm, DSH_MARKER[1]), texts[1]
    assert listener.connections == 1, texts[2]
    assert "sandbox" in done.stderr.lower(), done.stderr
    assert "off" in done.stderr.lower(), done.stderr
