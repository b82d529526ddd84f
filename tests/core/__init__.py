"""Tests for app.core: generation settings, history store, streaming, settings file."""
