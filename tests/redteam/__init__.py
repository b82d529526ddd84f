"""The red-team campaign of issue 35: hostile input at each of Kestrel's open doors.

Each case is the exact request, schema, file, server or link that once crashed, stalled or
fooled Kestrel, run against the real parts (real llama.cpp, real HTTP on 127.0.0.1, real
files, links and processes). One file per door. Every case runs in CI; the whole
campaign alone is

    .venv/bin/python -m pytest tests/redteam
"""
