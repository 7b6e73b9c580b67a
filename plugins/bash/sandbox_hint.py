"""What the model is told when a sandboxed command failed the way the sandbox makes
commands fail: a write refused outside the writable folders, or no network.

The words are the C library's and the usual tools' (``Read-only file system`` is
EROFS; ``Network is unreachable`` and a failed name lookup are what a network
namespace with only a loopback gives). A refused connection to 127.0.0.1 is named too:
the loopback inside is the sandbox's own, so a server dsh did not start in it is not
there. The hint says how to ask for more (the bash tool's ``escalate``); it never
widens anything itself.
"""

from __future__ import annotations

import re

from dsh.sandbox import Policy, Widening

_READ_ONLY = re.compile(r"(?:'([^'\n]+)'|(/[^\s:'\"]+))?:? Read-only file system")
_NO_NETWORK = re.compile(
    r"Network is unreachable|Could not resolve host|Temporary failure in name resolution"
    r"|Name or service not known|getaddrinfo|No address associated with hostname"
    r"|nodename nor servname|EAI_AGAIN|ENETUNREACH",
)
_REFUSED = re.compile(
    r"Connection refused|ECONNREFUSED|Couldn't connect to server"
    r"|Failed to connect to (127\.0\.0\.1|localhost)"
)


def sandbox_hint(output: str, policy: Policy, widening: Widening) -> str | None:
    """A marker for the model when ``output`` shows the sandbox got in the way, else
    None. ``widening``: what the command already ran with."""
    if widening.unsandboxed:
        return None
    hints: list[str] = []
    refused = _READ_ONLY.search(output)
    if refused is not None:
        path = refused.group(1) or refused.group(2)
        writable = (
            "only the private /tmp is writable"
            if policy == "read-only"
            else "only the project and the private /tmp are writable"
        )
        named = f" ({path})" if path else ""
        hints.append(
            f"a write was refused{named}: the sandbox ({policy}) makes the rest of the "
            f"filesystem read-only and {writable}. If the command must write there, call "
            'bash again with "escalate": {"write": ["<existing folder>"], "reason": "..."}'
        )
    if not widening.network:
        if _NO_NETWORK.search(output):
            hints.append(
                "the sandbox has no network (only a loopback of its own). If the command "
                'needs it, call bash again with "escalate": {"network": true, "reason": "..."}'
            )
        elif _REFUSED.search(output):
            hints.append(
                "a connection was refused: inside the sandbox 127.0.0.1 is the sandbox's own "
                "loopback, shared by the commands you start (a server you started with "
                "run_in_background is there), and the host's network is out of reach. To "
                'reach a server outside, call bash again with "escalate": {"network": true, '
                '"reason": "..."}'
            )
    if not hints:
        return None
    return "\n".join(f"[sandbox: {hint}]" for hint in hints)
