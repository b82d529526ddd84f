"""Chats: sending and the answer line, the saved conversations, the open chat, drafts, the history as others change it."""
