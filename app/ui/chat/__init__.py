"""The chat: its list, its header, the composer with its attachments, and the calls the window makes for a chat."""
