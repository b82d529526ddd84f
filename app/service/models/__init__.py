"""The model the engine holds: the session, the engine child process and its line, threads, idle and background."""
