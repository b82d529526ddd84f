"""The service core every front end drives: plain asyncio, in wings by purpose (see docs/design.md, "The service")."""
