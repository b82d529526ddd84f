"""What a backend can do beyond streaming text: what its registration declares, and what a refusal names."""

from __future__ import annotations

from enum import StrEnum


class Capability(StrEnum):
    """What a backend can do beyond streaming text (its answers' shapes and inputs); each value
    reads as the plural in "takes no ..."."""

    TOOLS = "tools"  # calls read from the model's text (AnswerShape.tools)
    GRAMMARS = "grammars"  # an answer held to a GBNF grammar (AnswerShape.grammar)
    JSON_SCHEMAS = "JSON schemas"  # an answer held to a JSON schema or to one JSON object
    IMAGES = "images"  # images in a user's turn, through a vision projector paired with the model
    EMBEDDINGS = "embeddings"  # vectors of text (no engine backend makes them yet: app/documents does)
    SPEECH = "speech"  # audio in or out (none yet)
