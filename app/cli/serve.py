"""`kestrel serve`: the API server without the window, until Ctrl+C."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from app.cli.user_error import EXIT_DEVICE, EXIT_MODEL, UserError
from app.cli.chat import resolve_model
from app.cli.failure_words import cli_words
from app.core.paths import data_paths
from app.core.server_settings import ServerSettings, is_loopback
from app.engine.protocol import ErrorKind
from app.library.installed import InstalledModel
from app.library.models import ModelLibrary
from app.service.models.client import EngineClient
from app.service.doors.models import ModelDoor
from app.service.doors.settings import SettingsDoor
from app.service.root import Service
from app.service.events import ApiRequestLogged, Event, Problem

if TYPE_CHECKING:
    from app.server.runner import ApiServer

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_LISTEN = 8  # the port is taken, or the address is not this PC's
EXIT_INTERRUPTED = 130


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="serve your models to other programs through an OpenAI- and "
                                              "Anthropic-compatible API, until Ctrl+C")
    serve.add_argument("--port", type=int, help="the port (default: the setting, normally 8765)")
    serve.add_argument("--host", help="the address to listen on (default: the setting, normally 127.0.0.1; "
                                      "any other address lets other machines reach the server)")
    serve.add_argument("--model", help="the model to load first: an installed model's id or a GGUF file "
                                       "(default: your default model)")
    serve.add_argument("--share", action="store_true", help="share your models with your other PCs too (Kestrel "
                                                            "Link): TLS on this PC's network address, paired "
                                                            "devices only; a pairing code is shown")
    serve.add_argument("--share-host", metavar="ADDRESS", help="the address to share on (default: this PC's "
                                                               "network address)")
    serve.add_argument("--share-port", type=int, metavar="PORT", help="the port to share on (default: the "
                                                                       "setting, normally 8766)")
    serve.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_serve(args))
    except UserError as exc:
        print(f"kestrel: {exc}", file=sys.stderr, flush=True)
        return exc.status
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


def server_settings(saved: ServerSettings, args: argparse.Namespace) -> ServerSettings:
    """The settings with --host and --port over them. A --host that is not loopback is the
    user's explicit choice to listen beyond this PC (and start() warns about it)."""
    chosen = saved
    if args.host is not None:
        chosen = dataclasses.replace(chosen, host=args.host, listen_beyond_this_pc=not is_loopback(args.host))
    if args.port is not None:
        chosen = dataclasses.replace(chosen, port=args.port)
    if getattr(args, "share", False):
        chosen = dataclasses.replace(chosen, share=True)
    if getattr(args, "share_host", None) is not None:
        chosen = dataclasses.replace(chosen, share=True, share_host=args.share_host)
    if getattr(args, "share_port", None) is not None:
        chosen = dataclasses.replace(chosen, share=True, share_port=args.share_port)
    try:
        return chosen.validated()
    except ValueError as exc:
        flag = ("--share-host" if "share_host" in str(exc) else "--share-port" if "share_port" in str(exc)
                else "--host" if "host" in str(exc) else "--port")
        raise UserError(f"{flag}: {exc}".replace("server.host", "the host").replace("server.port", "the port"),
                        EXIT_USAGE) from None


async def _serve(args: argparse.Namespace) -> int:
    model = resolve_model(args.model)
    paths = data_paths().ensure()
    service = Service(history_path=paths.history_db, settings_path=paths.settings_file,
                      library=ModelLibrary(paths.models), client=EngineClient(), calibrate=True)
    door, model_door = SettingsDoor(service), ModelDoor(service)
    service.subscribe(_print_problem)
    stop = asyncio.Event()
    undo = _on_stop_signals(stop.set)
    try:
        await service.open()
        settings = door.settings
        if not settings.server.key:  # made on first use, and kept for the next start
            await door.update_settings(dataclasses.replace(settings, server=settings.server.with_key()))
        chosen = server_settings(door.settings.server, args)
        if not await _load(model_door, model, stop):
            return EXIT_INTERRUPTED
        from app.server.runner import ApiServer  # here: every other command starts without uvicorn

        server = ApiServer(service.api, lambda: chosen)
        if not await server.start():
            print(f"kestrel: {server.error}", file=sys.stderr, flush=True)
            return EXIT_LISTEN
        shared: ApiServer | None = None
        try:
            print(f"Kestrel API server on {server.address}")
            if chosen.share:
                shared = await _share(service, chosen)
                if shared is None:
                    return EXIT_LISTEN
            print(f"API key: {chosen.key}", flush=True)
            print("Press Ctrl+C to stop.", file=sys.stderr, flush=True)
            await stop.wait()
        finally:
            if shared is not None:
                await shared.stop()
            await server.stop()
        print("Stopped.", file=sys.stderr, flush=True)
        return EXIT_OK
    finally:
        undo()
        await service.shutdown()


async def _share(service: Service, chosen: ServerSettings) -> ApiServer | None:
    """Start Kestrel Link's sharing server and say its address, a new pairing code and the certificate's
    fingerprint; None (said on stderr) when it cannot listen or keep its certificate."""
    from app.cli.link import code_lines
    from app.server.link.files import LinkFiles
    from app.server.link.sharing import sharing_server

    files = LinkFiles.at(data_paths())
    try:
        shared = sharing_server(files, service.api, lambda: chosen)
        code = files.new_code()
    except OSError as exc:
        print(f"kestrel: Kestrel could not keep its certificate in {files.folder} ({exc.strerror}).",
              file=sys.stderr, flush=True)
        return None
    if not await shared.start():
        print(f"kestrel: sharing: {shared.error}", file=sys.stderr, flush=True)
        return None
    print(f"Sharing with other computers on {shared.address} (paired devices only)")
    for line in code_lines(code, shared.address, time.time()):
        print(line)
    return shared


async def _load(door: ModelDoor, model: InstalledModel, stop: asyncio.Event) -> bool:
    """Load the model first (False: Ctrl+C came first); UserError if it does not load."""
    print(f"Loading {model.title}…", file=sys.stderr, flush=True)
    loading = asyncio.ensure_future(door.load_model(model))
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({loading, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not loading.done():
        loading.cancel()
        await asyncio.gather(loading, return_exceptions=True)
        print("Interrupted.", file=sys.stderr, flush=True)
        return False
    if not loading.result():
        error = door.load_error
        message = cli_words(error.failure) if error else door.model_detail
        raise UserError(message, EXIT_DEVICE if error and error.kind == ErrorKind.PLACEMENT else EXIT_MODEL)
    return True


def _on_stop_signals(stop: Callable[[], None]) -> Callable[[], None]:
    """Ctrl+C and SIGTERM call stop (on the loop); the returned function puts things back."""
    loop = asyncio.get_running_loop()
    kinds = [signal.SIGINT, signal.SIGTERM]
    try:
        for kind in kinds:
            loop.add_signal_handler(kind, stop)
    except NotImplementedError:  # Windows' loops have no signal handlers; signal.signal works there
        previous = {kind: signal.signal(kind, lambda *_: loop.call_soon_threadsafe(stop)) for kind in kinds}

        def put_back() -> None:
            for kind, handler in previous.items():
                signal.signal(kind, handler)

        return put_back

    def undo() -> None:
        for kind in kinds:
            loop.remove_signal_handler(kind)

    return undo


def _print_problem(event: Event) -> None:
    """Problems, and one line per finished request (as llama-server and Ollama log them)."""
    if isinstance(event, Problem):
        print(f"kestrel: {event.text}", file=sys.stderr, flush=True)
    elif isinstance(event, ApiRequestLogged):
        r = event.record
        tokens = f" {r.prompt_tokens}+{r.completion_tokens} tokens, {r.tokens_per_s:.1f} tokens/s" \
            if r.completion_tokens else ""
        print(f"{r.at:%H:%M:%S} {r.client} {r.endpoint} {r.status} {r.model}{tokens}".rstrip(), file=sys.stderr,
              flush=True)
