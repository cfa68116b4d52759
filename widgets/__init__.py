"""Reusable Textual widgets for hermes-tui. May import engine, never hermes_tui."""
