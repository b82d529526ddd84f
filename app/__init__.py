"""Kestrel: an offline AI assistant for the desktop."""

__version__ = "0.1.0"
