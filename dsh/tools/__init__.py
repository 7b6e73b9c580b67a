"""Tools: their definition, the registry, and running a model's call.

This module is public API: plugins import from ``dsh.tools``.
"""

from __future__ import annotations

from dsh.tools.definition import ToolContext, ToolDefinition, ToolOutput
from dsh.tools.service import CallOutcome, ToolService, parse_arguments

__all__ = [
    "CallOutcome",
    "ToolContext",
    "ToolDefinition",
    "ToolOutput",
    "ToolService",
    "parse_arguments",
]
