"""The local HTTP API server: OpenAI- and Anthropic-compatible endpoints over the service core."""
