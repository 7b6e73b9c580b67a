"""Rich renderables for transcript entries, shared by the Textual app and plain mode.

Both UIs fold the same session events into the same entries; this module turns
those entries (a tool call's header, its presentation, a turn's footer, the status
line, a notice) into ``rich`` renderables so the two look alike. It imports rich
only - never Textual - so the plain line mode and tests stay light.

A tool's look comes from its own presenters (see :mod:`dsh.tools.presentation`);
a tool without them, or whose presenter fails, gets a generic card: its name, a
one-line summary of the arguments and the result text.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import (
    Console,
    ConsoleOptions,
    ConsoleRenderable,
    Group,
    RenderableType,
    RenderHook,
    RenderResult,
)
from rich.panel import Panel
from rich.segment import Segment
from rich.text import Text

from dsh.control_chars import is_visible, visible
from dsh.tools.approval import ApprovalRequest
from dsh.tools.definition import ToolDefinition
from dsh.tools.presentation import (
    AgentView,
    CallResult,
    ChecklistView,
    CommandView,
    DiffView,
    FileDiff,
    Presentation,
    ScreenView,
    TextView,
)
from dsh.ui.entries import (
    NoticeEntry,
    ToolEntry,
    TranscriptFold,
    TurnFooter,
    format_cost,
    format_tokens,
)
from dsh.ui.session_status import Status

if TYPE_CHECKING:
    from dsh.agent import AgentOptions

log = logging.getLogger(__name__)

SUMMARY_KEYS = (
    "command",
    "file_path",
    "path",
    "pattern",
    "query",
    "url",
    "text",
    "description",
    "plan",  # a plan tool's: its first line (a heading), not the whole plan as JSON
)
SUMMARY_WIDTH = 80
SYNTAX_THEME = "ansi_dark"
"""ANSI colours follow the terminal's palette, and vanish cleanly without colour."""

STATUS_ICONS: dict[str, tuple[str, str]] = {
    "awaiting-approval": ("?", "bold yellow"),
    "running": ("●", "cyan"),
    "done": ("✓", "green"),
    "failed": ("✗", "red"),
    "denied": ("⊘", "red"),
    "cancelled": ("■", "yellow"),
}
STATE_LABELS = {
    "idle": "idle",
    "thinking": "thinking",
    "answering": "answering",
    "running-tool": "running",
    "waiting-for-you": "waiting for you",
    "retrying": "retrying",
}
"""The core's states; a plugin's activity shows as it names it."""
NOTICE_STYLES = {"info": ("•", "cyan"), "warning": ("⚠", "yellow"), "error": ("✗", "bold red")}


class ToolLookup(Protocol):
    """What this module needs of the tools service (``runtime.root.get(TOOLS)``)."""

    def get(self, name: str) -> ToolDefinition | None: ...


# ---------------------------------------------------------------- presentation


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """The call's arguments as a dict, or None when the model sent no JSON object."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def tool_presentation(tools: ToolLookup | None, entry: ToolEntry) -> Presentation:
    """How the call looks now: the tool's ``present_call`` while it waits or runs,
    ``present_result`` once it ended, else (no tool, no presenter, arguments that
    are not a JSON object, a presenter that fails) the generic card."""
    args = parse_arguments(entry.arguments)
    tool = tools.get(entry.name) if tools is not None else None
    if tool is not None and args is not None:
        view: Presentation | None = None
        try:
            if entry.ended_ms is None and entry.status in ("running", "awaiting-approval"):
                if tool.present_call is not None:
                    view = tool.present_call(args)
            elif tool.present_result is not None:
                result = CallResult(
                    text=entry.result or "",
                    is_error=entry.is_error,
                    error_code=entry.error_code,
                    meta=entry.meta,
                )
                view = tool.present_result(args, result)
        except Exception:  # a plugin's bug must not break the transcript
            log.exception("presenter of tool %s failed", entry.name)
            view = None
        if view is not None:
            return visible_view(view)
    return generic_view(entry)


def visible_view(view: Presentation) -> Presentation:
    """``view`` with every text made safe to show (:func:`dsh.control_chars.visible`):
    a presenter builds it from the call's arguments and result, which the model and
    the tool chose."""
    changes: dict[str, Any] = {}
    for item in dataclasses.fields(view):
        value = getattr(view, item.name)
        if isinstance(value, str):
            changes[item.name] = visible(value)
    match view:
        case DiffView(files=files):
            changes["files"] = tuple(
                FileDiff(visible(f.path), visible(f.diff), f.added, f.removed) for f in files
            )
        case ScreenView(rows=rows):
            changes["rows"] = tuple(visible(row) for row in rows)
        case ChecklistView(items=items):
            changes["items"] = tuple((visible(text), status) for text, status in items)
        case AgentView(title=title, status=status, lines=lines):
            # Each is one line of a card: a newline in what the child said is shown.
            changes["title"] = visible(title, one_line=True)
            changes["status"] = visible(status, one_line=True) if status else status
            changes["lines"] = tuple(visible(line, one_line=True) for line in lines)
    return dataclasses.replace(view, **changes)


def visible_request(request: ApprovalRequest) -> ApprovalRequest:
    """What an approval dialog shows of ``request``: its texts made safe to show (the
    command, the path and the diff are the model's)."""
    shown = ("tool_name", "summary", "details", "reason", "grant", "grant_covers", "agent_label")
    update = {
        name: visible(value) for name in shown if isinstance(value := getattr(request, name), str)
    }
    return request.model_copy(update=update)


def generic_view(entry: ToolEntry) -> TextView:
    return TextView(title=generic_title(entry), body=entry.result)


def generic_title(entry: ToolEntry) -> str:
    summary = tool_summary(entry)
    return f"{entry.name} {summary}" if summary else entry.name


def tool_summary(entry: ToolEntry, width: int = SUMMARY_WIDTH) -> str:
    """One line saying what the call is about: the value of a well-known argument
    (command, file_path, path, pattern, query, url, text, description, plan), else the
    compact JSON; the raw text when it is not a JSON object."""
    args = parse_arguments(entry.arguments)
    if args is None:
        return _one_line(visible(entry.arguments), width)
    for key in SUMMARY_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return _one_line(visible(value), width)
    if not args:
        return ""
    compact = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    return _one_line(visible(compact), width)


def _one_line(text: str, width: int) -> str:
    lines = text.strip().splitlines()
    line = lines[0] if lines else ""
    more = len(lines) > 1
    if len(line) > width:
        line, more = line[: width - 1].rstrip(), True
    return f"{line}…" if more else line


def render_presentation(
    view: Presentation, *, expanded: bool = False, max_lines: int = 20, show_title: bool = True
) -> RenderableType:
    """The view as a rich renderable; long bodies are cut to ``max_lines`` unless
    ``expanded``. ``show_title=False`` leaves out a title the caller already shows."""
    limit = None if expanded else max(1, max_lines)
    match view:
        case TextView():
            return _text_view(view, limit, show_title)
        case CommandView():
            return _command_view(view, limit)
        case DiffView():
            return _diff_view(view, limit, show_title)
        case ScreenView():
            return _screen_view(view, limit)
        case ChecklistView():
            return _checklist_view(view, show_title)
        case AgentView():
            return _agent_view(view, limit, show_title)
    return Text(str(view))  # pragma: no cover - a view type this module does not know


def _text_view(view: TextView, limit: int | None, show_title: bool) -> RenderableType:
    parts: list[RenderableType] = []
    if show_title and view.title:
        parts.append(Text(view.title, style="bold"))
    if view.body:
        lines = view.body.rstrip("\n").splitlines()
        cut = 0
        if (keep := _kept(lines, limit)) is not None:
            lines, cut = lines[:keep], len(lines) - keep
        body = "\n".join(lines)
        if view.language == "markdown":
            # Prose to read (a plan), not source to highlight.
            from rich.markdown import Markdown  # markdown-it and pygments: 30 ms at start

            parts.append(Markdown(body, code_theme=SYNTAX_THEME))
        elif view.language:
            parts.append(highlighted(body, view.language))
        else:
            parts.append(Text(body))
        if cut:
            parts.append(_more(cut, "more"))
    return Group(*parts) if len(parts) != 1 else parts[0]


def _command_view(view: CommandView, limit: int | None) -> RenderableType:
    parts: list[RenderableType] = [highlighted(f"$ {view.command}", "bash")]
    if view.description:
        parts.append(Text(view.description, style="dim"))
    if view.output:
        lines = view.output.rstrip("\n").splitlines()
        if (keep := _kept(lines, limit)) is not None:
            parts.append(_more(len(lines) - keep, "earlier"))
            lines = lines[-keep:]
        parts.append(Text("\n".join(lines)))
    pill = exit_pill(view)
    if pill is not None:
        parts.append(pill)
    return Group(*parts)


def exit_pill(view: CommandView) -> Text | None:
    """How the command ended: ``exit 0`` green, ``exit 1`` red, killed, timed out."""
    if view.timed_out:
        return Text(" timed out ", style="bold black on yellow")
    if view.signal:
        return Text(f" killed {view.signal} ", style="bold white on red")
    if view.exit_code is None:
        return None
    style = "bold black on green" if view.exit_code == 0 else "bold white on red"
    return Text(f" exit {view.exit_code} ", style=style)


def _diff_view(view: DiffView, limit: int | None, show_title: bool) -> RenderableType:
    parts: list[RenderableType] = []
    if show_title and view.title:
        parts.append(Text(view.title, style="bold"))
    for file in view.files:
        parts.append(
            Text.assemble(
                (file.path, "bold"),
                " ",
                (f"+{file.added}", "green"),
                " ",
                (f"\u2212{file.removed}", "red"),  # a minus sign
            )
        )
        lines = file.diff.rstrip("\n").splitlines()
        cut = 0
        if (keep := _kept(lines, limit)) is not None:
            lines, cut = lines[:keep], len(lines) - keep
        parts.append(diff_text(lines))
        if cut:
            parts.append(_more(cut, "more"))
    return Group(*parts)


def diff_text(
    lines: list[str], *, added: str = "green", removed: str = "red", hunk: str = "cyan"
) -> Text:
    """A unified diff coloured line by line (the colours are rich styles)."""
    text = Text()
    for index, line in enumerate(lines):
        if line.startswith(("+++", "---", "diff ", "index ")):
            style = "bold"
        elif line.startswith("@@"):
            style = hunk
        elif line.startswith("+"):
            style = added
        elif line.startswith("-"):
            style = removed
        else:
            style = ""
        if index:
            text.append("\n")
        text.append(line, style=style)
    return text


def _screen_view(view: ScreenView, limit: int | None) -> RenderableType:
    rows = list(view.rows)
    keep = len(rows)
    while keep and not rows[keep - 1].strip():  # trailing blank rows say nothing
        keep -= 1
    if view.cursor is not None:
        keep = max(keep, min(len(rows), view.cursor[0] + 1))
    rows, first = rows[:keep], 0
    if limit is not None and len(rows) > limit:
        first = len(rows) - limit
        rows = rows[first:]
    body = Text()
    for index, row in enumerate(rows):
        if index:
            body.append("\n")
        line = Text(row)
        if view.cursor is not None and view.cursor[0] == first + index:
            column = view.cursor[1]
            if column >= len(row):
                line.append(" " * (column - len(row) + 1))
            line.stylize("reverse", column, column + 1)
        body.append_text(line)
    panel = Panel(body, title=view.title or None, title_align="left", expand=False)
    if view.status:
        return Group(panel, Text(view.status, style="dim"))
    return panel


CHECK_MARKS = {
    "pending": ("☐", ""),
    "in_progress": ("◐", "bold"),
    "completed": ("☑", "dim strike"),
}


def _checklist_view(view: ChecklistView, show_title: bool) -> RenderableType:
    text = Text()
    if show_title and view.title:
        text.append(view.title, style="bold")
    for content, status in view.items:
        mark, style = CHECK_MARKS.get(status, ("☐", ""))
        if text:
            text.append("\n")
        text.append(f"{mark} ")
        text.append(content, style=style)
    return text


AGENT_LINES = 5
"""Lines of a child agent's activity a card shows until it is opened."""


def _agent_view(view: AgentView, limit: int | None, show_title: bool) -> RenderableType:
    """The title and how the run stands, the last of its activity, and its session."""
    head = Text()
    if show_title and view.title:
        head.append(view.title, style="bold")
    if view.status:
        if head:
            head.append(" · ", style="dim")
        style = {"failed": "red", "cancelled": "yellow", "running": "cyan"}.get(view.status, "dim")
        head.append(view.status, style=style)
    parts: list[RenderableType] = [head] if head else []
    lines = list(view.lines)
    keep = min(limit, AGENT_LINES) if limit is not None else None
    if keep is not None and len(lines) > keep:
        parts.append(_more(len(lines) - keep, "earlier"))
        lines = lines[-keep:]
    if lines:
        parts.append(Text("\n".join(lines)))
    parts.append(Text(f"session {view.session_id}", style="dim"))
    return Group(*parts)


def highlighted(code: str, language: str) -> Text:
    """Code coloured by its language, as plain rich Text: no background, no padding
    to the full width (which a log would keep as trailing blanks)."""
    from rich.syntax import Syntax  # pygments: imported where code is first shown

    syntax = Syntax(code, language, theme=SYNTAX_THEME, background_color="default")
    text = syntax.highlight(code)
    text.rstrip()
    text.style = ""
    return text


def _kept(lines: list[str], limit: int | None) -> int | None:
    """How many of ``lines`` to show when they are cut to ``limit``, or None when all
    are shown: a single line over is shown, in the room its "… 1 more line" note
    would take."""
    return limit if limit is not None and len(lines) > limit + 1 else None


def _more(count: int, kind: str) -> Text:
    noun = "line" if count == 1 else "lines"
    return Text(f"… {count} {kind} {noun}", style="dim italic")


class Indented:
    """A renderable shifted right by ``by`` columns. Unlike ``rich.padding.Padding``
    it does not pad lines to a common width, so a log gets no trailing blanks."""

    def __init__(self, renderable: RenderableType, by: int = 2) -> None:
        self.renderable = renderable
        self.by = by

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(1, options.max_width - self.by)
        lines = console.render_lines(self.renderable, options.update_width(width), pad=False)
        margin = Segment(" " * self.by)
        for line in lines:
            yield margin
            yield from line
            yield Segment.line()


class VisibleOutput(RenderHook):
    """A console render hook that shows every control character of what is printed as
    a picture (:func:`dsh.control_chars.visible`): pushed on plain mode's console, so
    nothing printed there can drive the terminal, whichever code printed it."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Visible(renderable) for renderable in renderables]


class _Visible:
    def __init__(self, renderable: ConsoleRenderable) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            if segment.control or is_visible(segment.text):
                yield segment
            else:
                yield Segment(visible(segment.text), segment.style)


# ---------------------------------------------------------------- one-liners


def format_duration(ms: int) -> str:
    """``45 ms``, ``2.5 s``, ``3m 07s``: a quick call reads as quick, not as 0.0 s."""
    ms = max(0, ms)
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m {rest:02d}s"


def tool_header(entry: ToolEntry, now_ms: int | None = None, *, spinner: str = "●") -> Text:
    """``✓ name summary 1.2 s``: the status icon (``spinner`` while running), the
    tool's name, what the call is about, and its elapsed time or duration."""
    icon, style = STATUS_ICONS.get(entry.status, ("•", ""))
    if entry.status == "running":
        icon = spinner
    text = Text.assemble((icon, style), " ", (entry.name, "bold"))
    summary = tool_summary(entry)
    if summary:
        text.append(f" {summary}")
    if entry.ended_ms is not None:
        text.append(f" {format_duration(entry.ended_ms - entry.started_ms)}", style="dim")
    elif now_ms is not None and entry.status in ("running", "awaiting-approval"):
        text.append(f" {format_duration(now_ms - entry.started_ms)}", style="dim")
    if entry.status == "awaiting-approval":
        text.append(" awaiting approval", style="yellow")
    elif entry.status == "denied" and entry.denial:
        text.append(f" denied: {_one_line(entry.denial, SUMMARY_WIDTH)}", style="red")
    elif entry.status == "denied":
        text.append(" denied", style="red")
    return text


def render_footer(footer: TurnFooter) -> Text:
    """``── turn 3 · completed · 12.3k in (9.1k cached, 74%) · 512 out · $0.0021 · 4.2 s``"""
    style = {"completed": "dim", "cancelled": "yellow", "failed": "red", "stopped": "yellow"}
    parts = [f"turn {footer.turn}", footer.outcome]
    if footer.reason and footer.reason != footer.outcome:
        parts[-1] = f"{footer.outcome}: {footer.reason}"
    usage = footer.usage
    if usage is not None:
        billed = usage.billed_input_tokens
        piece = f"{format_tokens(billed)} in"
        if usage.cache_read_tokens:
            ratio = usage.cache_read_tokens / billed if billed else 0.0
            piece += f" ({format_tokens(usage.cache_read_tokens)} cached, {ratio:.0%})"
        parts += [piece, f"{format_tokens(usage.output_tokens)} out"]
    if footer.cost is not None:
        parts.append(format_cost(footer.cost))
    parts.append(format_duration(footer.duration_ms))
    return Text("── " + " · ".join(parts), style=style.get(footer.outcome, "dim"))


def render_status(status: Status, *, queued: int = 0, now_ms: int | None = None) -> Text:
    """``model · state · tokens · ctx 42% · $0.0123 · cache 74% saved $0.04 · N
    queued``; a retry's
    state says when, which and why (``retrying in 4 s (2/5): 429 rate limited``, its
    seconds counted from ``now_ms``, default now)."""
    parts: list[tuple[str, str]] = []
    if status.model:
        parts.append((status.model, "bold"))
    state = STATE_LABELS.get(status.state, status.state)
    if status.state == "retrying" and status.retry is not None:
        state = status.retry.label(int(time.time() * 1000) if now_ms is None else now_ms)
    if status.state in ("running-tool", "waiting-for-you") and status.tool:
        state = f"{state} {status.tool}" if status.state == "running-tool" else state
    parts.append((state, "yellow" if status.state in ("waiting-for-you", "retrying") else ""))
    if status.usage is not None:
        parts.append((f"{format_tokens(status.usage.total_tokens)} tokens", ""))
    ratio = status.context_ratio
    if ratio is not None:
        parts.append((f"ctx {ratio:.0%}", "red" if ratio > 0.85 else ""))
    if status.cost is not None:
        parts.append((format_cost(status.cost), ""))
    cache = status.cache_hit_ratio
    if cache is not None:
        saved = f" saved {format_cost(status.cache_saved)}" if status.cache_saved else ""
        parts.append((f"cache {cache:.0%}{saved}", ""))
    if queued:
        parts.append((f"{queued} queued", "cyan"))
    text = Text()
    for index, (piece, style) in enumerate(parts):
        if index:
            text.append(" · ", style="dim")
        text.append(piece, style=style)
    return text


def status_report(fold: TranscriptFold | None, next_model: AgentOptions | None) -> str | None:
    """What ``/status`` says of the session on screen (None while none is shown): the
    status line, naming while idle the model the next request will use
    (``next_model``, the agent's options; the log names a model only once a request
    used it, so after ``/model`` this is the one the TUI's status bar shows)."""
    if fold is None:
        return None
    status = fold.status
    if status.state == "idle" and next_model is not None:
        status = dataclasses.replace(status, provider=next_model.provider, model=next_model.model)
    return render_status(status, queued=len(fold.queued)).plain


def render_notice(entry: NoticeEntry) -> Text:
    mark, style = NOTICE_STYLES.get(entry.level, ("•", ""))
    return Text(f"{mark} {entry.text}", style=style)
