"""The chat history store: SQLite, its schema and migrations, repair of a damaged file, rows, images and drafts."""
