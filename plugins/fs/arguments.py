"""The arguments of the filesystem tools: their JSON Schemas and field texts are what
the model reads, so they say what to send and what happens.

Optional fields are plain types with defaults (an explicit ``null`` means the default)
and range checks live in validators, so the schemas stay within the keywords every
provider accepts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

MAX_READ_LINES = 2000


def _path(value: str, name: str) -> str:
    if not value.strip():
        raise ValueError(f"{name} must not be empty")
    if "\x00" in value:
        raise ValueError(f"{name} must not contain a NUL character")
    return value


def _inline_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with ``$ref``s replaced by their definitions and titles dropped, for
    providers that do not follow references."""
    definitions = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(dict(definitions[ref.removeprefix("#/$defs/")]))
            return {k: walk(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    inlined: dict[str, Any] = walk(schema)
    return inlined


class ReadArguments(BaseModel):
    file_path: str = Field(
        description="The file to read: an absolute path, or relative to the working directory."
    )
    offset: int = Field(
        default=1,
        description="The line number to start at (1-based). Use the footer's offset to "
        "read the next window of a long file.",
    )
    limit: int = Field(
        default=MAX_READ_LINES,
        description=f"How many lines to read, at most {MAX_READ_LINES} (the default).",
    )

    @field_validator("file_path")
    @classmethod
    def _file_path(cls, value: str) -> str:
        return _path(value, "file_path")

    @field_validator("offset", "limit", mode="before")
    @classmethod
    def _defaults(cls, value: Any, info: Any) -> Any:
        if value is None:
            return 1 if info.field_name == "offset" else MAX_READ_LINES
        return value

    @field_validator("offset", "limit")
    @classmethod
    def _positive(cls, value: int, info: Any) -> int:
        if value < 1:
            raise ValueError(f"{info.field_name} must be 1 or more")
        # A larger window is a harmless overreach: read the most allowed, not fail.
        return min(value, MAX_READ_LINES) if info.field_name == "limit" else value


class WriteArguments(BaseModel):
    file_path: str = Field(
        description="The file to create or overwrite: an absolute path, or relative to the "
        "working directory. Missing parent directories are created."
    )
    content: str = Field(description="The complete new content of the file.")

    @field_validator("file_path")
    @classmethod
    def _file_path(cls, value: str) -> str:
        return _path(value, "file_path")


_OLD = (
    "The exact text to replace, copied from the file: same whitespace and indentation, "
    "without the `n: ` line-number prefixes that read adds. Include enough surrounding "
    "lines to make it unique."
)
_NEW = "The text to put in its place (must differ from old_string)."
_ALL = "Replace every occurrence instead of requiring exactly one. Default false."


def _check_pair(old: str, new: str, where: str = "") -> None:
    if not old:
        raise ValueError(f"{where}old_string must not be empty (use write to create a file)")
    if old.replace("\r\n", "\n") == new.replace("\r\n", "\n"):
        raise ValueError(f"{where}old_string and new_string are the same; nothing would change")


class EditArguments(BaseModel):
    file_path: str = Field(
        description="The file to edit: an absolute path, or relative to the working directory."
    )
    old_string: str = Field(description=_OLD)
    new_string: str = Field(description=_NEW)
    replace_all: bool = Field(default=False, description=_ALL)

    @field_validator("file_path")
    @classmethod
    def _file_path(cls, value: str) -> str:
        return _path(value, "file_path")

    @field_validator("replace_all", mode="before")
    @classmethod
    def _default(cls, value: Any) -> Any:
        return False if value is None else value

    @model_validator(mode="after")
    def _differs(self) -> EditArguments:
        _check_pair(self.old_string, self.new_string)
        return self


class EditItem(BaseModel):
    old_string: str = Field(description=_OLD)
    new_string: str = Field(description=_NEW)
    replace_all: bool = Field(default=False, description=_ALL)

    @field_validator("replace_all", mode="before")
    @classmethod
    def _default(cls, value: Any) -> Any:
        return False if value is None else value


class MultiEditArguments(BaseModel):
    file_path: str = Field(
        description="The file to edit: an absolute path, or relative to the working directory."
    )
    edits: list[EditItem] = Field(
        description="The edits, applied in order, each to the result of the ones before it. "
        "If any of them fails, none is applied."
    )

    @field_validator("file_path")
    @classmethod
    def _file_path(cls, value: str) -> str:
        return _path(value, "file_path")

    @model_validator(mode="after")
    def _edits(self) -> MultiEditArguments:
        if not self.edits:
            raise ValueError("edits must hold at least one edit")
        for number, item in enumerate(self.edits, 1):
            _check_pair(item.old_string, item.new_string, f"edit {number}: ")
        return self

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return _inline_definitions(super().model_json_schema(*args, **kwargs))


class GlobArguments(BaseModel):
    pattern: str = Field(
        description="A glob: `*` within a name, `**` across directories, `?`, `[abc]`, "
        "`{a,b}`. Without `/` it matches file names at any depth (`*.py`); with `/` it "
        "matches paths from the search directory (`src/**/*.ts`)."
    )
    path: str = Field(
        default=".",
        description="The directory to search: absolute, or relative to the working "
        "directory. Default: the working directory.",
    )

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        return _path(value, "pattern")

    @field_validator("path", mode="before")
    @classmethod
    def _default(cls, value: Any) -> Any:
        return "." if value is None or value == "" else value


class GrepArguments(BaseModel):
    pattern: str = Field(
        description="A regular expression in ripgrep (Rust) syntax, e.g. `def \\w+_test`, "
        "`TODO|FIXME`; `(?i)` makes it case-insensitive. Escape literal `( ) [ ] { } . * + ?`."
    )
    path: str = Field(
        default=".",
        description="The file or directory to search: absolute, or relative to the working "
        "directory. Default: the working directory.",
    )
    include: str = Field(
        default="",
        description="Search only files matching this glob, e.g. `*.py` or `*.{ts,tsx}`. "
        "Default: every file.",
    )

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        if not value:
            raise ValueError("pattern must not be empty")
        return value

    @field_validator("pattern", "path", "include")
    @classmethod
    def _no_nul(cls, value: str, info: ValidationInfo) -> str:
        # ripgrep takes each as a command-line argument, which cannot hold a NUL.
        if "\x00" in value:
            raise ValueError(f"{info.field_name} must not contain a NUL character")
        return value

    @field_validator("path", mode="before")
    @classmethod
    def _path_default(cls, value: Any) -> Any:
        return "." if value is None or value == "" else value

    @field_validator("include", mode="before")
    @classmethod
    def _include_default(cls, value: Any) -> Any:
        return "" if value is None else value
