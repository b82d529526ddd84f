"""Command-line entry points: the headless chat, the hardware doctor, and `models`
(list, info, add, remove, get) for the model library."""
