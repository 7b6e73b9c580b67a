"""Fixtures of the lsp plugin tests: a small Python project (``project``), a
misbehaving fake server (``fake_server.py``) and the shared harness (``harness``)."""
