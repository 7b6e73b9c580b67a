"""What configuration from a folder the user has not trusted may do: only narrow.

A project's ``.dsh/settings.toml`` is written by whoever wrote the repository. Until
the user trusts the project (:mod:`dsh.trust`), each of its keys is kept only if it
can make dsh do less than the user's own layers (user settings, environment) say:

====================================  =============================================
key                                   from an untrusted folder
====================================  =============================================
``permissions.mode``                  kept when stricter than or equal to the
                                      user's own (read-only < default <
                                      accept-edits < bypass), else ignored
``permissions.deny``                  kept, added to the user's deny rules
``permissions.allow``                 ignored
``agent.provider``, ``agent.model``   kept: only providers the user configured
                                      exist, since nothing here can add one
``agent.reasoning_effort``,           kept
``agent.temperature``
``agent.max_steps``,                  kept when it lowers the user's limit (or
``agent.max_tokens``                  sets one where there was none), else ignored
``tui.theme``, ``tui.mouse``          kept: themes come only from dsh and
                                      ``$DSH_HOME``
``sandbox.policy``                    kept when it narrows the user's own
                                      (off < workspace-write < read-only), else
                                      ignored; a trusted project's is held to
                                      the same rule, so trust never applies it
``storage.backend``                   ignored: where the user's sessions are kept
                                      is theirs
``plugins.modules``                   ignored: it loads and runs Python code
``plugins.disabled``                  ignored: the plugin list is the user's
``plugins.<name>.…``                  ignored: providers, base URLs, headers,
                                      ``api_key_env``, programs to start
anything else                         ignored (unknown keys, and tables added
                                      later such as MCP servers and hooks)
====================================  =============================================

The project's ``.env`` (keys for the credential store) is read only in a trusted
folder. It is not listed with what is ignored (most projects keep their own app's
settings there, none of dsh's business); when a key dsh needs is found only there,
the error that says the key is missing says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsh.control_chars import visible
from dsh.permission_modes import MODES

KEPT_AS_IS = {
    ("agent", "provider"),
    ("agent", "model"),
    ("agent", "reasoning_effort"),
    ("agent", "temperature"),
    ("permissions", "deny"),
    ("tui", "theme"),
    ("tui", "mouse"),
}
LIMITS = {("agent", "max_steps"), ("agent", "max_tokens")}


@dataclass(frozen=True)
class Ignored:
    """One key of untrusted configuration that was not applied, and why."""

    key: str
    """Dotted, as in ``dsh config get``: ``permissions.mode``."""
    value: str
    """The value as shown to the user: TOML-like text with control characters escaped,
    so a hostile value cannot drive the terminal it is shown on."""
    reason: str
    origin: str = ""
    """The file it comes from, when not the project document (``.claude/settings.json``)."""

    def line(self) -> str:
        return f"{self.key} = {self.value} ({self.reason})"

    @property
    def trust_applies(self) -> bool:
        """Trusting the folder would apply it (not so for :data:`NARROW_ONLY`)."""
        return self.key not in NARROW_ONLY


NARROW_ONLY = frozenset({"sandbox.policy"})
"""Keys a project may only narrow even when trusted: what contains the commands run in
a repository is never the repository's to loosen."""


def narrow(
    project: Mapping[str, Any], own: Mapping[str, Any]
) -> tuple[dict[str, Any], list[Ignored]]:
    """The part of ``project`` an untrusted folder may set, given ``own`` (the user's
    own layers merged), and every key left out."""
    kept: dict[str, Any] = {}
    ignored: list[Ignored] = []
    for table, content in project.items():
        if not isinstance(content, Mapping) or table not in (
            "agent",
            "permissions",
            "tui",
            "sandbox",
        ):
            for key, value in _leaves(table, content):
                ignored.append(Ignored(_named(key), shown(value), _named(_reason_elsewhere(key))))
            continue
        own_table = own.get(table, {})
        own_table = own_table if isinstance(own_table, Mapping) else {}
        for key, value in content.items():
            verdict = _verdict((table, key), value, own_table.get(key))
            if verdict is None:
                kept.setdefault(table, {})[key] = value
            else:
                ignored.append(Ignored(_named(f"{table}.{key}"), shown(value), verdict))
    return kept, ignored


def _verdict(key: tuple[str, str], value: Any, own: Any) -> str | None:
    """None to keep ``value``, else why it is ignored. A value of the wrong type is
    kept, so that validation reports it with its file as for any settings file."""
    if key in KEPT_AS_IS:
        return None
    if key == ("permissions", "mode"):
        if value not in MODES:
            return None
        current = own if own in MODES else "default"
        if MODES.index(value) <= MODES.index(current):  # narrowest first
            return None
        return f"would widen the permission mode from {current} to {value}"
    if key == ("sandbox", "policy"):
        from dsh.sandbox.policy import DEFAULT_POLICY, POLICIES

        if value not in POLICIES:
            return None
        current = own if own in POLICIES else DEFAULT_POLICY
        if POLICIES.index(value) <= POLICIES.index(current):  # narrowest first
            return None
        return f"would widen the sandbox from {current} to {value}"
    if key == ("permissions", "allow"):
        return "would let calls run without asking" if value else None
    if key in LIMITS:
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        if own is None or (isinstance(own, int) and value <= own):
            return None
        return f"would raise your limit of {own}"
    return "not a key a project may set before you trust it"


def _reason_elsewhere(key: str) -> str:
    parts = key.split(".")
    if parts[0] == "storage":
        # Sessions of every project share one catalog: a project choosing the backend
        # would move the user's later sessions out of sight of the earlier ones.
        return "where your sessions are kept is yours to choose"
    if parts[0] == "hooks":
        return "would run its commands"
    if parts[0] != "plugins":
        return "not applied from a folder you have not trusted"
    if len(parts) == 2:
        return {
            "modules": "would load and run Python code",
            "disabled": "would change which plugins load",
        }.get(parts[1], "would configure plugins")
    # The innermost part that says what it is: headers.X-Team is a header.
    for part in reversed(parts[2:]):
        for words, reason in _PLUGIN_REASONS:
            if any(word in part.lower() for word in words):
                return reason
    return f"would configure the {parts[1]} plugin"


_PLUGIN_REASONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("base_url", "url"), "would send requests, and possibly your key, to another address"),
    (("headers", "header"), "would add headers to requests"),
    (("api_key_env", "key", "token", "credential"), "would choose which key is sent"),
    (("providers", "provider"), "would add or change model providers"),
    (("command", "args", "program", "cmd", "server"), "would start a program"),
    (("env",), "would set environment variables"),
)


def _leaves(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping) and value:
        found: list[tuple[str, Any]] = []
        for key, inner in value.items():
            found.extend(_leaves(f"{prefix}.{key}", inner))
        return found
    return [(prefix, value)]


def shown(value: Any, limit: int = 200) -> str:
    """``value`` as one line of TOML-like text, its control and bidi characters made
    visible (:func:`dsh.control_chars.visible`)."""
    if isinstance(value, str):
        text = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list):
        text = "[" + ", ".join(shown(item, limit) for item in value) + "]"
    elif isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k} = {shown(v, limit)}" for k, v in value.items()) + "}"
    else:
        text = str(value)
    text = visible(text, one_line=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _named(text: str) -> str:
    return visible(text, one_line=True)
