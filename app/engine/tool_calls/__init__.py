"""Tool calls read back from a model's streamed text, per chat-template family."""
