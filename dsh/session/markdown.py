"""A session as a Markdown transcript, for reading and sharing (``dsh sessions show``
and ``export``). Control characters in it are shown as pictures
(:func:`dsh.control_chars.visible`), so the file is safe to print on a terminal.

What a rewind took back stays in the transcript, each part marked ``(rewound)``, with
a line where the rewind happened: the log keeps it, the conversation does not."""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence

from dsh.control_chars import visible
from dsh.llm import PluginSource, ReasoningBlock, TextBlock, ToolCallBlock
from dsh.session.events import SessionEvent, latest_title
from dsh.session.header import SessionHeader
from dsh.session.history import rewinds_of
from dsh.session.payloads import AssistantMessageData, HistoryRewound, ToolResult, TurnEnd

REWOUND = " (rewound)"


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime(
        "%Y-%m-%d %H:%M UTC"
    )


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())


def to_markdown(
    header: SessionHeader,
    events: Sequence[SessionEvent],
    *,
    children: Sequence[tuple[str, str]] = (),
) -> str:
    """``children``: the (id, title) of the sessions started from this one (its
    subagents' and forks'), listed under the heading."""
    title = latest_title(events)
    out = [f"# {title or 'dsh session'}", ""]
    out.append(f"- Session: `{header.id}`")
    if header.cwd:
        out.append(f"- Directory: `{header.cwd}`")
    out.append(f"- Started: {_when(header.created_at)}")
    if header.parent_session and header.origin == "subagent":
        preset = f", profile {header.agent_preset}" if header.agent_preset else ""
        out.append(
            f"- Subagent of: `{header.parent_session}` (depth {header.delegation_depth}{preset})"
        )
    elif header.parent_session:
        out.append(f"- Forked from: `{header.parent_session}` (first {header.seed_length} events)")
    for child_id, child_title in children:
        out.append(f"- Started from it: `{child_id}` {child_title}")
    out.append("")

    rewinds = rewinds_of(events)
    for event in events:
        mark = REWOUND if rewinds.shadowed(event.seq) else ""
        match event.type:
            case "user/message" | "steering/message":
                message = event.data
                if isinstance(message.source, PluginSource):
                    heading = f"Context from {message.source.plugin}"
                else:
                    heading = "Steering" if event.type == "steering/message" else "User"
                out += [f"## {heading}{mark}", "", message.text(), ""]
            case "assistant/message":
                data = event.data
                assert isinstance(data, AssistantMessageData)
                if not data.message.content:
                    continue
                suffix = " (interrupted)" if data.interrupted else ""
                out += [f"## Assistant{suffix}{mark}", ""]
                for block in data.message.content:
                    match block:
                        case ReasoningBlock(text=text) if text.strip():
                            out += [_quote(text), ""]
                        case TextBlock(text=text):
                            out += [text, ""]
                        case ToolCallBlock(name=name, arguments=arguments):
                            try:
                                pretty = json.dumps(json.loads(arguments), indent=2)
                            except ValueError:
                                pretty = arguments
                            out += [f"**Tool call** `{name}`", "", _fence(pretty, "json"), ""]
            case "tool/result":
                data = event.data
                assert isinstance(data, ToolResult)
                result = data.message.result
                label = "Tool error" if result.is_error else "Tool result"
                text = "".join(b.text for b in result.content if isinstance(b, TextBlock))
                out += [f"**{label}**{mark}", "", _fence(text or "(no output)"), ""]
            case "turn/end":
                reason = event.data.reason.kind if isinstance(event.data, TurnEnd) else "?"
                if reason not in ("completed",):
                    out += [f"*Turn ended: {reason}*{mark}", ""]
            case "history/rewound" if isinstance(event.data, HistoryRewound):
                turn = event.data.turn
                if (event.data.to_seq, event.seq) in rewinds.runs:
                    said = (
                        f"Rewound to before turn {turn}: what is marked (rewound) is no "
                        "longer in the conversation."
                    )
                else:
                    said = (
                        f"A rewind to before turn {turn} that this log does not hold a start for."
                    )
                out += [f"*{said}*", ""]
    # Read on a terminal (``dsh sessions show``, ``cat``), nothing in it may drive one.
    return visible("\n".join(out).rstrip() + "\n")
