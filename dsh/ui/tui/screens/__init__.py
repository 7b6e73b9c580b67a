"""The TUI's dialogs: approval, questions, the session picker.

Each lives in its own module, imported when a dialog first opens (not at startup).
Each is a ``ModalScreen[T]`` that returns its answer through ``dismiss``: push it with
a callback (or a future, as :func:`dsh.ui.tui.dialogs.wait_screen` does).

- :mod:`.approval`: ``ApprovalScreen(request, *, guard_seconds)`` → ``ApprovalDecision``
- :mod:`.question`: ``QuestionScreen(questions, *, guard_seconds)`` →
  ``list[Answer]``, or None when dismissed
- :mod:`.sessions`: ``SessionPicker(entries, cwd, search, *, search_delay)`` → a
  session id, or None; ``catalog_search(catalog)`` makes its ``search``
- :mod:`.guard`: ``KeyGuard``, how the approval and question dialogs tell keys
  typed for the prompt (which do not answer them) from keys pressed for them
- :mod:`.setup`: ``SetupScreen``, the first-run screen
"""
