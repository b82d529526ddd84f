"""Kestrel Link, the sharing side: this PC's certificate, its pairing codes, its paired devices, and the TLS server on the LAN."""
