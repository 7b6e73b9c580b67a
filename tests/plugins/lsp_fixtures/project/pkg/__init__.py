"""A tiny package the lsp tests ask a real language server about."""
