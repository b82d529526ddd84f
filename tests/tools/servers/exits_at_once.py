"""A server that dies before the handshake, saying why on stderr, as one missing its API key does."""

import sys

sys.stderr.write("starting the weather server\n")
sys.stderr.write("fatal: WEATHER_API_KEY is not set\n")
sys.exit(3)
