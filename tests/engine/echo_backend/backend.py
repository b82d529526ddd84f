"""The echo backend's engine side: a Backend that streams the last user message back, word by word."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator, Sequence

from app.core.answer_stats import FinishReason
from app.core.conversation import Role
from app.engine.answers.answer_common import AnswerTiming
from app.engine.control import GenerationControl
from app.engine.protocol import ChatMessage, Delta, Done, Generate, Load, Loaded
from tests.engine.echo_backend import SCHEME

DEVICE = "echo (no device)"


class EchoBackend:
    """Says "<speaker> heard: <the last user message>"; cancel and pause act between two words."""

    def __init__(self, loaded: Loaded, speaker: str) -> None:
        self.loaded = loaded
        self._speaker = speaker

    @classmethod
    def open(cls, request: Load) -> "EchoBackend":
        started = time.perf_counter()
        where = request.model_path
        speaker = where[len(SCHEME):] if where.startswith(SCHEME) else Path(where).read_text(encoding="utf-8").strip()
        loaded = Loaded(request_id=request.request_id, model_path=where, load_ms=(time.perf_counter() - started) * 1000,
                        device=DEVICE, context_length=request.context_length, threads=1, architecture="echo",
                        chat_format="echo", placement_reason="the echo backend runs nowhere")
        return cls(loaded, speaker or "nobody")

    def generate(self, request: Generate, control: GenerationControl) -> Iterator[Delta | Done]:
        timing = AnswerTiming()
        heard = next((m.content for m in reversed(request.messages) if m.role is Role.USER), "")
        words = f"{self._speaker} heard: {heard}".split(" ")
        finish = FinishReason.STOP
        for number, word in enumerate(words[:request.settings.max_tokens]):
            if control.cancelled:
                finish = FinishReason.CANCELLED
                break
            control.wait_while_paused()
            timing.first = timing.first or time.perf_counter()
            timing.last, timing.generated = time.perf_counter(), number + 1
            yield Delta(request.request_id, word if number == 0 else " " + word)
        else:
            finish = FinishReason.STOP if len(words) <= request.settings.max_tokens else FinishReason.LENGTH
        yield Done(request.request_id, timing.stats(prompt_tokens=self.count_prompt(request.messages, True),
                                                    device=DEVICE, finish=finish, chat_format="echo", left_out=0))

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def count_prompt(self, messages: Sequence[ChatMessage], thinking: bool) -> int:
        return sum(self.count_tokens(message.content) for message in messages)

    def reset(self) -> None:
        """Nothing is cached."""

    def close(self) -> None:
        """Nothing is held."""

    def forget_states(self) -> None:
        """No states are saved."""
