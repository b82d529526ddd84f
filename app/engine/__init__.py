"""The inference engine: runs in its own child process."""
