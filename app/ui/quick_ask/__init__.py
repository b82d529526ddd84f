"""Quick ask: the small window a global shortcut opens over whatever the person is doing (issue 39)."""
