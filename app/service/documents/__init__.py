"""Documents in chats: attached files, the collections, their background indexing, and the sources put before a question."""
