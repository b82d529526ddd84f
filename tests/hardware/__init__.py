"""Tests for app.hardware and the doctor command: probe sources, recorded machines, placement."""
