"""Qt widgets, item models and the signal bridge: the only place with QtWidgets."""
