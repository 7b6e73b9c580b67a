"""The plugins bundled with dsh.

Each module (or subpackage) here exposes ``plugin``, a :class:`dsh.kernel.Plugin`, and
imports only dsh's public API modules (listed in docs/architecture.md). The core never
imports this package; the kernel discovers it by name. A name that starts with ``_`` is
not a plugin: ``_shared`` holds the code several plugins use (the chat-completions
protocol, file helpers), which they import as a library.
"""
