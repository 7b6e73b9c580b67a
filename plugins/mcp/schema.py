"""A server's tools as the model may see them: names and argument schemas.

Names are ``mcp__<server>__<tool>``, each part cut to ``[A-Za-z0-9_-]`` (what
DeepSeek's and OpenAI's function names allow), at most 64 characters; a name cut
short, or one two tools would share, ends in a short hash of the original so it
stays the same from one start to the next (the prompt cache keys on the tool list).

Schemas are a server's ``inputSchema`` reduced to the JSON Schema keywords function
calling accepts: ``$ref`` into ``$defs`` inlined, unknown keywords dropped (a server's
``$schema``, ``examples`` or vendor keys must not get the request refused), a list of
types turned into ``anyOf``, and the top level always an object with properties.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

PREFIX = "mcp"
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

# Keywords kept, by where they may appear. Anything else a server sends is dropped.
_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "items",
        "enum",
        "const",
        "default",
        "anyOf",
        "oneOf",
        "allOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "uniqueItems",
        "additionalProperties",
    }
)
_MAX_DEPTH = 12


def clean(part: str) -> str:
    return _UNSAFE.sub("_", part) or "_"


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, safe and at most 64 characters."""
    name = f"{PREFIX}__{clean(server)}__{clean(tool)}"
    if len(name) <= MAX_NAME:
        return name
    suffix = f"_{_hash(f'{server}/{tool}')}"
    return name[: MAX_NAME - len(suffix)] + suffix


def tool_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """Each of a server's tool names → its dsh name, no two alike, in sorted order."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    # A name that needs no cleaning keeps it; one made safe yields on a clash.
    for tool in sorted(tools, key=lambda t: (clean(t) != t, t)):
        name = tool_name(server, tool)
        if name in taken:  # "a.b" and "a_b" both clean to "a_b"
            suffix = f"_{_hash(f'{server}/{tool}')}"
            name = name[: MAX_NAME - len(suffix)] + suffix
        taken.add(name)
        names[tool] = name
    return dict(sorted(names.items()))


def normalise(schema: Any) -> dict[str, Any]:
    """A server's input schema as function calling accepts it."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = schema.get(key)
        if isinstance(found, dict):
            defs.update(found)
    out = _node(schema, defs, 0)
    out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    for key in ("anyOf", "oneOf", "allOf", "items", "enum", "const"):
        out.pop(key, None)  # the top level is one object, not a choice of shapes
    required = out.get("required")
    if isinstance(required, list):
        out["required"] = [name for name in required if name in out["properties"]]
    return out


def _node(node: Any, defs: dict[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(node, dict):
        return {}
    if depth > _MAX_DEPTH:
        return {"type": "object"}  # too deep, or a $ref loop: any object
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rsplit("/", 1)[-1]) if ref.startswith("#/") else None
        merged = {**(target if isinstance(target, dict) else {}), **node}
        merged.pop("$ref")
        node = merged
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _KEYWORDS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {str(k): _node(v, defs, depth + 1) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _node(value, defs, depth + 1)
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            out[key] = [_node(v, defs, depth + 1) for v in value]
        elif key == "required":
            if isinstance(value, list):
                out[key] = [v for v in value if isinstance(v, str)]
        elif key == "type" and isinstance(value, list):
            types = [t for t in value if isinstance(t, str)]
            if len(types) == 1:
                out[key] = types[0]
            elif types:
                out["anyOf"] = [{"type": t} for t in types]
        elif key == "description" and not isinstance(value, str):
            continue
        else:
            out[key] = value
    return out
