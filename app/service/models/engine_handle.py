"""EngineHandle: the engine as the service and the front ends use it (EngineClient is one)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from app.core.generation import GenerationSettings
from app.core.settings import DevicePreference, PromptLookupMode
from app.engine import protocol as p
from app.hardware.report import HardwareReport
from app.service.models.engine_errors import EngineDied

if TYPE_CHECKING:
    from app.service.models.client import EngineClient


class EngineHandle(Protocol):
    """What app/service, app/ui and app/cli ask of the engine, and nothing more.

    The engine is always a process of Kestrel's own; what runs a model inside it is the
    registered backend that takes the model's location (app/engine/backends/registry.py): a
    file or a folder on llama.cpp or ONNX Runtime, or an address (the test backend's echo://
    now, remote servers next), so nothing here asks for a file. The local backends' options
    (device, GPU layers, threads, saved states, a projector) are ignored by a backend that
    runs nowhere on this machine.

    EngineClient drives the real engine process; tests drive the controller with a
    scripted engine (tests/helpers/scripted_engine.py) behind the same members, so a
    member used here and missing there fails mypy or those tests, not a user.

    The contract both keep: load() starts an engine when none runs and raises EngineError
    (its failure: BadModelFile, DeviceRefused, a load failure) for a model it cannot load;
    generate() yields Delta events, then one Done whose finish_reason is stop, length,
    context or cancelled; cancel, pause and resume act between two tokens; an engine
    that dies or stops responding raises EngineCrashed into the request in flight and
    calls on_died, and the next request starts a new engine and loads the model again.
    """

    # Prompt-lookup drafting for the next answers (Generate.prompt_lookup).
    prompt_lookup: PromptLookupMode
    # Told when the engine ends without being asked (died, or ended as hung).
    on_died: Callable[[EngineDied], None] | None

    @property
    def pid(self) -> int | None:
        """The engine's process id while one runs (None when none does): its CPU time is counted
        as the engine's, whichever backend it runs."""

    @property
    def loaded(self) -> p.Loaded | None:
        """The model loaded now, where and why there (None while none is)."""

    @property
    def load_request(self) -> p.Load | None:
        """What was last asked of load() (the engine may have clamped the context)."""

    async def load(self, model_path: str, *, context_length: int = 4096, threads: int | None = None,
                   device: DevicePreference = DevicePreference.AUTO, gpu_layers: int | None = None,
                   chat_template: str | None = None, state_ram_bytes: int = 0, state_dir: str | None = None,
                   state_disk_bytes: int = 0, projector_path: str | None = None) -> p.Loaded:
        """Load the model at model_path (a file, a folder, or an address a registered backend takes),
        starting an engine if none runs; a local backend loads it where placement says (with its
        vision projector, given one: Loaded.vision, or vision_problem saying why not)."""

    async def unload(self) -> None:
        """Free the model's memory; the next answer loads it again."""

    async def forget_states(self) -> None:
        """Drop the engine's saved chat states."""

    async def count_tokens(self, text: str) -> int:
        """How many tokens text takes inside a prompt, by the loaded model's tokenizer; beside
        a running answer, not after it. EngineError(NoModel) at once when none is loaded."""

    async def count_prompt(self, messages: Sequence[p.ChatMessage], *, thinking: bool = True) -> int:
        """How many tokens generate's prompt for these messages is (the template applied)."""

    async def hardware_report(self) -> HardwareReport:
        """What the engine sees of this machine (where the local backends place a model)."""

    async def shutdown(self, timeout: float = 5.0) -> None:
        """End the engine (without on_died); the next request starts a new one."""

    def generate(self, messages: Sequence[p.ChatMessage], settings: GenerationSettings | None = None, *,
                 stop: Sequence[str] = (), trim_history: bool = False,
                 threads: int | None = None, shape: p.AnswerShape | None = None,
                 keep_state: bool = True) -> AsyncIterator[p.Delta | p.Done]:
        """Stream an answer: Delta events, then one Done. shape: a raw prompt, a grammar, a JSON
        schema or tools (the API server's), as the request gave them (the backend builds what it
        follows); a shape the model or its backend cannot have raises EngineError. keep_state False:
        the engine saves no state of this conversation (a temporary chat)."""

    def cancel(self) -> None:
        """Stop the answer being generated; its stream ends with Done(cancelled)."""

    def pause(self) -> None:
        """Hold generation between two tokens."""

    def resume(self) -> None:
        """Let a paused generation go on."""


if TYPE_CHECKING:
    def _engine_client_is_an_engine_handle(client: EngineClient) -> EngineHandle:
        """Never called: mypy checks here that EngineClient has every member above."""
        return client
