"""Turning a conversation into the prompt a model was trained on: its chat template in a sandbox, outside text kept as text."""
