"""The window's API server: starting and stopping it, its window, and serving from the tray."""
