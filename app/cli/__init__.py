"""Command-line entry points: the headless chat and the hardware doctor."""
