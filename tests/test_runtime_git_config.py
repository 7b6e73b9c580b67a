"""The user's own git settings are read as the runtime starts, in a thread, and the
runtime does not wait for them: it is up while git still runs, and the first child's
git environment, built after, carries them.

A new ``python`` runs the runtime (the settings are read once a process) with a ``git``
first on ``PATH`` that holds ``git config`` until the test lets it go, and answers it
with one setting of the user's. The waits are bounded hang guards, not timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.waits import HANG_S

FAKE_GIT = """#!/bin/sh
# git config is held until the test lets it go; it answers one setting of the user's
case "$1" in
  config)
    echo "$2" >> "{log}"
    while [ ! -e "{release}" ]; do sleep 0.01; done
    [ "$2" = "--global" ] && printf 'core.pager\\nmy-pager\\0'
    exit 0 ;;
esac
exec {real} "$@"
"""

PROBE = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path

    from dsh.policy.git_config import git_environment_overrides
    from dsh.runtime import start_runtime

    async def main() -> None:
        release = Path(sys.argv[1])
        # Up while git config is held: before the fix this waited on it.
        runtime = await asyncio.wait_for(start_runtime(cwd=Path("project").resolve()), 60)
        try:
            held = not release.exists()
            release.touch()
            env = await asyncio.to_thread(git_environment_overrides, {})
            pairs = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"]
                     for i in range(int(env["GIT_CONFIG_COUNT"]))}
            print(json.dumps({"up_while_held": held, "pager": pairs.get("core.pager")}))
        finally:
            await runtime.aclose()

    asyncio.run(main())
    """
)


def test_the_runtime_is_up_before_the_users_git_settings_are_read(tmp_path: Path) -> None:
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True)
    tools = tmp_path / "bin"
    tools.mkdir()
    log, release = tmp_path / "git.log", tmp_path / "release"
    fake = tools / "git"
    fake.write_text(FAKE_GIT.format(log=log, release=release, real=real.stdout.strip()))
    fake.chmod(0o755)
    (tmp_path / "project").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    env.update(
        DSH_HOME=str(tmp_path / "home"),
        DEEPSEEK_API_KEY="sk-test",
        PATH=f"{tools}{os.pathsep}{env.get('PATH', '')}",
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(release)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S * 4,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"up_while_held": True, "pager": "my-pager"}
    assert log.read_text().split() == ["--system", "--global"]  # read once
