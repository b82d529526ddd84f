"""A server that never answers the handshake and ignores the end of its stdin."""

import signal
import sys
import time

signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.stderr.write("hanging server started\n")
sys.stderr.flush()
while True:
    time.sleep(1)
