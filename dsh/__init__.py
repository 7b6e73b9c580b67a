"""dsh: an interactive terminal coding agent with durable sessions."""

__version__ = "0.1.0.dev0"
