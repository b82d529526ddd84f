"""The open chat's messages: their item model, how each is laid out and painted, Markdown, and the growing answer."""
