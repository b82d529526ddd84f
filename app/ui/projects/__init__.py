"""The window's projects: the chat list's Projects grouping, the project dialog, and their host."""
