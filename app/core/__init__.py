"""Plain Python: conversations, messages, settings, the history store, data paths."""
