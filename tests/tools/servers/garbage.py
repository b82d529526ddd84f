"""A server that answers everything with lines that are not JSON-RPC (a banner, a log line)."""

import sys

sys.stdout.write("Welcome to the garbage server v1.0!\n")
sys.stdout.flush()
for line in sys.stdin:
    sys.stdout.write("ERROR? what is " + line[:20].strip() + "\n")
    sys.stdout.flush()
