"""The window's side of memory: the Memory window and the memories an answer used."""
