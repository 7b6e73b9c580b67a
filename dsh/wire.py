"""How dsh values look as JSON: frozen camelCase models and extensible tagged unions.

The JSON names follow the TypeScript original (``toolCallId``, ``cacheReadTokens``) so
its logs read as ours; Python code uses snake_case. Absent optional fields are left
out of the JSON rather than written as ``null``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, PlainSerializer, PlainValidator, SerializationInfo
from pydantic.alias_generators import to_camel

from dsh.control_chars import escape_in_json


class Frozen(BaseModel):
    """Base of every immutable wire value."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        defer_build=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form: camelCase keys, no ``None`` values."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True)


class Opaque(Frozen):
    """Base of the fallback member of a tagged union: keeps every field it was given."""

    model_config = ConfigDict(extra="allow")


B = TypeVar("B", bound=BaseModel)


class TaggedUnion(Generic[B]):
    """A union of models told apart by one tag field, open to new members at run time.

    Values whose tag no member claims validate as ``fallback`` (an :class:`Opaque`
    subclass), so data written by newer versions or absent plugins survives a round
    trip instead of failing. Declare the field type as a type alias, so type checkers
    see the base class::

        ContentBlock: TypeAlias = Annotated[Block, blocks.validator, blocks.serializer]
    """

    def __init__(self, label: str, base: type[B], tag: str, fallback: type[B]) -> None:
        self.label = label
        self.base = base
        self.tag = tag
        self.fallback = fallback
        self._members: dict[str, type[B]] = {}
        self._core: set[str] = set()
        self.validator = PlainValidator(self.validate)
        self.serializer = PlainSerializer(_serialize_member)

    def tag_of(self, model: type[B]) -> str:
        field = model.model_fields.get(self.tag)
        value = field.default if field is not None else None
        if not isinstance(value, str):
            raise TypeError(
                f"{model.__name__} needs a default string {self.tag!r} to join {self.label}"
            )
        return value

    def member(self, model: type[B]) -> type[B]:
        """Class decorator for the built-in members, which can never be unregistered."""
        self.register(model)
        self._core.add(self.tag_of(model))
        return model

    def register(self, model: type[B]) -> Callable[[], None]:
        """Add a member; returns the function that removes it again."""
        tag = self.tag_of(model)
        if tag in self._members:
            raise ValueError(f"{self.label} {self.tag} {tag!r} is already registered")
        self._members[tag] = model

        def unregister() -> None:
            if tag not in self._core and self._members.get(tag) is model:
                del self._members[tag]

        return unregister

    def lookup(self, tag: str) -> type[B] | None:
        return self._members.get(tag)

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(self._members)

    def validate(self, value: Any) -> B:
        if isinstance(value, self.base):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"{self.label} must be an object, not {type(value).__name__}")
        tag = value.get(self.tag)
        if not isinstance(tag, str):
            raise ValueError(f"{self.label} needs a string {self.tag!r} field")
        return self._members.get(tag, self.fallback).model_validate(value)


def _serialize_member(value: BaseModel, info: SerializationInfo) -> Any:
    return value.model_dump(
        mode=info.mode,
        by_alias=info.by_alias if info.by_alias is not None else True,
        exclude_none=info.exclude_none,
    )


def dumps(value: Any) -> str:
    """Compact JSON that refuses NaN and infinities, and writes lone surrogates (and
    what a terminal could obey) as their escapes (:func:`dsh.control_chars.escape_in_json`):
    the text always encodes as UTF-8, reads back the same, and is safe to print. How
    dsh writes every JSON line: stored records, ``dsh -p``'s output."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return escape_in_json(text)
