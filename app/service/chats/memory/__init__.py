"""Memory in chats: the person's memories kept (MemoryBook), chosen for each answer, put in its system prompt, and the remember tool."""
