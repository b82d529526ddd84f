"""The engine's backends, one subpackage each, and what they share."""
