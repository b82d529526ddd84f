"""Tool use in chats: the tools a chat offers, approval of each call, running it, and the room its result gets."""
