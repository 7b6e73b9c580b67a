"""Helpers for this project's own tests."""
