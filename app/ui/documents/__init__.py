"""The Documents window: collections, their files and how far their indexing is."""
