"""The speech catalog: its entries (resources/catalog.json's "speech", entries.py), downloading one into the speech
folder (fetch.py), and choosing among the speech that ships and the catalog's by id, name or language (choice.py)."""
