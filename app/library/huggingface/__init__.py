"""Hugging Face: what a user pastes, a repository's listing, the public model search, and safe file names from outside."""
