"""``dsh doctor``: what works here and what does not, one line each, with the fix.

The core's own checks are here: the settings (which files were read, the folder's
trust, keys not applied, plugins that failed to load), the configured provider's key
(where it was found; never any of its value), the sandbox's probe, git and node, and
with ``--live`` one request of ``max_tokens`` 1. Plugins add theirs through
:data:`dsh.hooks.DOCTOR_CHECK` (the provider's ``/models``, ``rg``, language servers,
MCP servers). The exit status is 1 when a check failed, else 0 (warnings alone: 0).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from dsh.credentials import CREDENTIALS, CredentialError, CredentialStore, Secret, redact
from dsh.doctor import DOCTOR_CHECK, MARKS, Check, DoctorAsk, fail, ok, warn
from dsh.kernel import PluginStatus
from dsh.llm import Finish, FinishAborted, FinishError, GenerateOptions, LlmError, user_text
from dsh.paths import dsh_home
from dsh.runtime import Runtime, start_runtime
from dsh.sandbox.service import SANDBOX
from dsh.settings import Settings, SettingsError, load_settings
from dsh.wire import dumps

_SOURCES = {
    "environment": "the environment",
    "credentials-file": "the credentials file",
    "project-env-file": "the project's .env",
    "home-env-file": "$DSH_HOME/.env",
}


def _settings_checks(settings: Settings) -> list[Check]:
    read = [str(document.path) for document in settings.documents]
    checks = [ok("settings", "settings", f"read {', '.join(read)}" if read else "defaults only")]
    if settings.project is not None:
        where = str(settings.root or settings.project.parent)
        if settings.trust == "trusted":
            checks.append(ok("settings", "trust", f"{where} is trusted"))
        else:
            state = "not trusted" if settings.trust == "untrusted" else "not decided"
            checks.append(
                warn(
                    "settings",
                    "trust",
                    f"{where} is {state}: {settings.project} applies only where it narrows",
                    f"`dsh trust {where}` if you want it applied in full",
                )
            )
    for ignored in settings.ignored:
        checks.append(
            warn(
                "settings",
                "ignored",
                f"{ignored.key} = {ignored.value} not applied ({ignored.reason})",
                "trust the folder (`dsh trust`) or remove the key",
            )
        )
    for note in settings.claude_notes:
        checks.append(ok("settings", "claude code", note))
    return checks


def _plugin_checks(runtime: Runtime, settings: Settings) -> list[Check]:
    return [
        fail(
            "settings",
            f"plugin {record.name}",
            f"failed to load: {record.error}",
            f"correct [plugins.{record.name}] in {settings.origin('plugins', record.name)}, "
            f'or disable it ([plugins] disabled = ["{record.name}"])',
        )
        for record in runtime.plugins.records
        if record.status is PluginStatus.FAILED
    ]


def _key_check(
    settings: Settings, credentials: CredentialStore
) -> tuple[Check | None, Secret | None]:
    """The configured provider's key, if a provider form names which it reads."""
    from dsh.setup import configured_forms

    provider = settings.agent.provider
    for form in configured_forms(settings):
        if form.route != provider or form.configured_key is None:
            continue
        ref = form.configured_key(settings.section("plugins", form.table))
        try:
            found = credentials.resolve(ref)
        except CredentialError as error:
            return fail("key", f"{provider} key", str(error), "repair or remove that file"), None
        if found is not None:
            where = _SOURCES.get(found.source.kind, found.source.kind)
            if found.source.path is not None:
                where += f" ({found.source.path})"
            return ok("key", f"{provider} key", f"{ref} found in {where}"), found.value
        withheld = credentials.withheld(ref)
        if withheld is not None:
            return (
                fail(
                    "key",
                    f"{provider} key",
                    f"{ref} is only in {withheld}, which is not read: the folder is not trusted",
                    "`dsh trust` this folder, or set it in the environment or with `dsh` setup",
                ),
                None,
            )
        return (
            fail(
                "key",
                f"{provider} key",
                f"no {ref} in the environment, $DSH_HOME/credentials.json or a .env file",
                f"export {ref}=..., or run `dsh` once to paste it in the setup",
            ),
            None,
        )
    return None, None


def _program_check(area: str, program: str, why: str, fix: str) -> Check:
    found = shutil.which(program)
    if found is None:
        return warn(area, program, f"not found on PATH ({why})", fix)
    return ok(area, program, found)


async def _sandbox_check(runtime: Runtime) -> Check:
    status = await runtime.root.get(SANDBOX).ready()
    if status.policy == "off":
        return warn(
            "sandbox",
            "sandbox",
            "off: commands the model runs have all of your powers",
            'set [sandbox] policy = "workspace-write" (or drop --sandbox off)',
        )
    if not status.active:
        return warn(
            "sandbox",
            "sandbox",
            f"cannot start: {status.reason}; every command will be asked for",
            "install bubblewrap and allow unprivileged user namespaces (docs/security.md)",
        )
    program = f" ({status.program})" if status.program else ""
    return ok("sandbox", "sandbox", f"{status.policy}, {status.backend}{program}")


async def _live_check(runtime: Runtime, ask: DoctorAsk) -> Check:
    """One request of one token, through the provider's adapter alone (no retries)."""
    name = f"{ask.provider} live request ({ask.model})"
    options = GenerateOptions(
        provider=ask.provider,
        model=ask.model,
        messages=(user_text("Reply with the word OK."),),
        max_tokens=1,
    )
    fix = "check the key, the model id ([agent] model) and the base_url"
    try:
        adapter = runtime.llm.adapter(ask.provider)
        async with asyncio.timeout(ask.timeout_s):
            async for chunk in adapter.stream(options):
                if isinstance(chunk, Finish):
                    if isinstance(chunk.reason, FinishError | FinishAborted):
                        return fail("live", name, chunk.reason.failure.message, fix)
                    return ok("live", name, f"answered (finish: {chunk.reason.kind})")
    except LlmError as error:
        return fail("live", name, error.failure.message, fix)
    except TimeoutError:
        return fail("live", name, f"no answer within {ask.timeout_s:g} s", fix)
    return fail("live", name, "the answer ended without a finish", fix)


async def _plugins_report(runtime: Runtime, ask: DoctorAsk) -> list[Check]:
    try:
        # Each listener bounds its own waits; this only guards against one that does not.
        async with asyncio.timeout(ask.timeout_s * 3):
            found = await runtime.root.parallel(DOCTOR_CHECK, ask)
    except TimeoutError:
        return [fail("plugins", "checks", "a plugin's check did not end", "`dsh plugins`")]
    except Exception as error:
        return [
            fail(
                "plugins",
                "checks",
                f"a plugin's check failed: {type(error).__name__}: {error}",
                "report it: a check should say what is wrong, not raise",
            )
        ]
    return [check for checks in found for check in checks]


async def collect(*, live: bool, timeout_s: float) -> tuple[list[Check], list[Secret]]:
    """Every check, in the order printed, and the secrets the output must not hold."""
    home, cwd = dsh_home(), Path.cwd()
    environment = [
        _program_check("git", "git", "checkpoints and /undo need it", "install git"),
        _program_check(
            "node", "node", "MCP servers started with npx need it", "install Node.js 18 or later"
        ),
    ]
    try:
        settings = await asyncio.to_thread(load_settings, home, cwd)
    except SettingsError as error:
        broken = fail(
            "settings",
            "settings",
            str(error),
            "correct the file (or `dsh config unset KEY`); nothing else can be checked until then",
        )
        return [broken, *environment], []
    checks = _settings_checks(settings)
    runtime = await start_runtime(home=home, cwd=cwd, settings=settings)
    secrets: list[Secret] = []
    try:
        checks += _plugin_checks(runtime, settings)
        key, secret = _key_check(settings, runtime.root.get(CREDENTIALS))
        if secret is not None:
            secrets.append(secret)
        if key is not None:
            checks.append(key)
        ask = DoctorAsk(
            provider=settings.agent.provider,
            model=settings.agent.model,
            live=live,
            timeout_s=timeout_s,
        )
        sandbox, contributed = await asyncio.gather(
            _sandbox_check(runtime), _plugins_report(runtime, ask)
        )
        checks += [check for check in contributed if check.area in ("key", "endpoint")]
        if live:
            checks.append(await _live_check(runtime, ask))
        checks += [sandbox, *environment]
        checks += [check for check in contributed if check.area not in ("key", "endpoint")]
    finally:
        await runtime.aclose()
    return checks, secrets


def format_lines(checks: Sequence[Check]) -> list[str]:
    lines = []
    for check in checks:
        line = f"{MARKS[check.status]} {check.name}: {check.detail}"
        if check.fix and check.status != "ok":
            line += f" (fix: {check.fix})"
        lines.append(line)
    failed = sum(check.status == "fail" for check in checks)
    warned = sum(check.status == "warn" for check in checks)
    if failed or warned:
        lines.append(
            f"{failed} problem{'s' * (failed != 1)}, {warned} warning{'s' * (warned != 1)}"
        )
    else:
        lines.append("everything works")
    return lines


def run_doctor(*, live: bool, as_json: bool, timeout_s: float) -> int:
    checks, secrets = asyncio.run(collect(live=live, timeout_s=timeout_s))
    failed = any(check.status == "fail" for check in checks)
    if as_json:
        text = dumps({"ok": not failed, "checks": [c.model_dump(by_alias=True) for c in checks]})
    else:
        text = "\n".join(format_lines(checks))
    # No check names a key's value; this holds even for one that quotes a server's reply.
    print(redact(text, *secrets))
    sys.stdout.flush()
    return 1 if failed else 0
