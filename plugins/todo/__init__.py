"""``todo_write``: the model keeps a visible checklist for the current work.

Each call replaces the whole list and is logged as a ``todo/write`` event, an event
type of this plugin's own; the UIs show the latest list beside the prompt while the
turn runs (a transcript panel), and a new turn starts without one.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from dsh.kernel import Context, Plugin
from dsh.services import TOOLS
from dsh.session import EventType, SessionEvent, register_events
from dsh.tools import (
    ChecklistView,
    ClaudeCodeName,
    Presentation,
    TextView,
    ToolContext,
    ToolDefinition,
    ToolError,
)
from dsh.transcript import Transcript, register_entries
from dsh.wire import Frozen

DESCRIPTION = (
    "Replace your todo list for the current task. Use it for work with three or more "
    "steps: list the steps, mark one in_progress while you work on it, and mark it "
    "completed as soon as it is done. Send the whole list every time."
)


class TodoItem(Frozen):
    content: str
    status: Literal["pending", "in_progress", "completed"]


class TodoWrite(Frozen):
    """The ``todo/write`` payload: the whole list, as the model last wrote it."""

    todos: tuple[TodoItem, ...]


TODO_WRITE = EventType("todo/write", TodoWrite)


class Todo(BaseModel):
    content: str = Field(description="what to do, as a short imperative sentence")
    status: Literal["pending", "in_progress", "completed"]


class TodoArguments(BaseModel):
    todos: list[Todo] = Field(description="the whole list, in order")

    @model_validator(mode="after")
    def _distinct(self) -> TodoArguments:
        contents = [todo.content.strip() for todo in self.todos]
        if any(not content for content in contents):
            raise ValueError("a todo needs some content")
        if len(set(contents)) != len(contents):
            raise ValueError("two todos have the same content")
        return self


async def todo_write(arguments: TodoArguments, context: ToolContext) -> str:
    if context.agent is None:
        raise ToolError("todo_write needs a session to record the list in", "NO_SESSION")
    session = context.agent.session
    items = tuple(TodoItem(content=t.content.strip(), status=t.status) for t in arguments.todos)
    session.append(TODO_WRITE.name, TodoWrite(todos=items))
    counts = Counter(item.status for item in items)
    return (
        f"Todo list updated: {counts['completed']} completed, {counts['in_progress']} in progress, "
        f"{counts['pending']} pending."
    )


def checklist(arguments: dict[str, Any]) -> Presentation:
    items = arguments.get("todos")
    if not isinstance(items, list):
        return TextView(title="Todos")
    return ChecklistView(
        title="Todos",
        items=tuple(
            (str(item.get("content", "")), item.get("status", "pending"))
            for item in items
            if isinstance(item, dict)
            and item.get("status") in ("pending", "in_progress", "completed")
        ),
    )


def show_todos(event: SessionEvent, transcript: Transcript) -> None:
    """``todo/write`` in a transcript: the list in a panel beside the prompt."""
    todos: TodoWrite = event.data
    items = tuple((todo.content, todo.status) for todo in todos.todos)
    transcript.set_panel("todo", ChecklistView(title="Todos", items=items) if items else None)


def vocabulary(ctx: Context) -> None:
    register_events(ctx, TODO_WRITE)
    register_entries(ctx, TODO_WRITE.name, show_todos)


def apply(ctx: Context, config: object) -> None:
    ctx.get(TOOLS).register(
        "todo_write",
        ToolDefinition(
            name="todo_write",
            description=DESCRIPTION,
            arguments=TodoArguments,
            execute=todo_write,
            read_only=True,  # it changes only the session's own record: never asked
            present_call=checklist,
            present_result=lambda arguments, result: checklist(arguments),
            claude_code=ClaudeCodeName("TodoWrite"),
        ),
    )


plugin = Plugin(
    name="todo",
    inject=(TOOLS,),
    apply=apply,
    vocabulary=vocabulary,
    description="the todo_write tool",
)
