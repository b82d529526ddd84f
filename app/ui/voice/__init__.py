"""The window's voice parts: the listening bar above the message box and what drives it."""
