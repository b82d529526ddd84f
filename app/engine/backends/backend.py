"""The one contract every engine backend keeps, and where it was told to run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence, runtime_checkable

from app.engine.control import GenerationControl
from app.engine.protocol import ChatMessage, Delta, Done, Generate, Loaded


@dataclass(frozen=True)
class DeviceChoice:
    """Where loading decided a model runs, in the words the user sees.

    Written once, by the code that chose the placement: the backend copies it into
    Loaded, and every answer's stats carry the same device text.
    """

    device: str  # "CPU", "GPU: NVIDIA GeForce RTX 4070 (ONNX Runtime)", ...
    reason: str = ""  # placement's words for why this device
    fallback_reasons: tuple[str, ...] = ()  # why each device tried before it failed


@runtime_checkable
class Backend(Protocol):
    """One loaded model, whatever runs it (llama.cpp, ONNX Runtime GenAI).

    The engine opens one with its registration's `open` (app/engine/backends/spec.py); the
    request loop only needs what is below. Cancel and pause take effect between two
    tokens of generate.
    """

    @property
    def loaded(self) -> Loaded:
        """The Loaded event: where the model runs, its context, its threads."""
        ...

    def generate(self, request: Generate, control: GenerationControl) -> Iterator[Delta | Done]:
        """Stream the answer: Delta events, then one Done."""
        ...

    def count_tokens(self, text: str) -> int:
        """How many tokens text takes inside a prompt, by the model's own tokenizer (no BOS).

        Called on the engine's counting thread while generate may run on another: it must
        touch nothing generate changes (app/engine/counting.py).
        """
        ...

    def count_prompt(self, messages: Sequence[ChatMessage], thinking: bool) -> int:
        """How many tokens generate's prompt for these messages is (the template applied,
        none left out); thinking as GenerationSettings.thinking. Same thread as count_tokens."""
        ...

    def reset(self) -> None:
        """Forget the cached conversation (the KV cache), keep the model."""
        ...

    def close(self) -> None:
        """Free the model's memory; the backend is not used again."""
        ...

    def forget_states(self) -> None:
        """Drop the saved conversation states it keeps (RAM and files), if it keeps any."""
        ...
