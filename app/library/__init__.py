"""The user's models: installed files, import, metadata, the starter model."""
