"""UI-process side of the engine: the async client and its lifecycle policy."""
