"""Code several bundled plugins share; not a plugin itself.

Discovery passes over names that start with ``_`` (see :func:`dsh.kernel.discover_bundled`),
so nothing here is loaded as a plugin; the plugins import it as they import any
library. Like them, it is built on dsh's public API alone.

- :mod:`dsh_plugins._shared.chat_completions`: the OpenAI-style chat-completions protocol
  the DeepSeek and OpenAI-compatible providers speak, gathered from its modules
  (``chat_models``, ``chat_request``, ``chat_stream``, ``chat_errors``, ``chat_body``,
  ``chat_adapter``).
- :mod:`dsh_plugins._shared.frontmatter`: the ``---`` header of skills and custom commands.
- :mod:`dsh_plugins._shared.definitions`: folders of ``NAME.md`` definitions (custom
  commands, agent profiles), read one way.
"""
