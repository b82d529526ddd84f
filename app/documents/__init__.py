"""Documents the user asks about: reading files into text, chunks that keep their place, and their index."""
