"""The red-team campaign of issue 35: hostile input at each of Kestrel's open doors.

Each case is the exact request, schema, file, server or link that once crashed, stalled or
fooled Kestrel, run against the real parts (real llama.cpp, real HTTP on 127.0.0.1, real
files and links). One file per door; all of it runs in CI, and the slow cases run as a
seeded sample there and in full with

    KESTREL_REDTEAM_FULL=1 .venv/bin/python -m pytest tests/redteam
"""
