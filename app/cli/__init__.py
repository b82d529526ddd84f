"""Command-line entry points: the headless chat, the hardware doctor, `models` (list, info,
add, remove, get) for the model library, and `serve` for the API server."""
