"""What a backend can do beyond streaming text: what its registration declares, and what a refusal names."""

from __future__ import annotations

from enum import StrEnum


class Capability(StrEnum):
    """What a backend can do beyond streaming text (its answers' shapes and inputs); each value
    reads as the plural in "takes no ..."."""

    TOOLS = "tools"  # calls read from the model's text (AnswerShape.tools)
    GRAMMARS = "grammars"  # an answer held to a GBNF grammar (AnswerShape.grammar)
    JSON_SCHEMAS = "JSON schemas"  # an answer held to a JSON schema or to one JSON object
    # Min-p sampling (GenerationSettings.min_p above 0): llama.cpp has it; ONNX Runtime GenAI
    # 0.18's search options have no min_p, so an answer asked with it is refused there, in words,
    # rather than sampled without it.
    MIN_P = "min-p sampling"
    IMAGES = "images"  # images in a user's turn, through a vision projector paired with the model
    EMBEDDINGS = "embeddings"  # vectors of text (no engine backend makes them yet: app/documents does)
    SPEECH = "speech"  # audio in or out (none yet)
