"""dsh: an interactive terminal coding agent with durable sessions."""

__version__ = "0.1.0.dev0"

DISTRIBUTION = "dsh-agent"
"""dsh's distribution: its name on PyPI and in ``pip``/``uv`` (the command and the
import package are ``dsh``)."""
