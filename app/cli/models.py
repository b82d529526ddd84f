"""`python -m app models`: list, inspect, add, remove and download the models in Kestrel's library.

Nothing here opens a socket except `models get`, and only when the user runs it: the
downloader is imported inside that command, not with this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TextIO, TypeVar
from urllib.parse import unquote, urlsplit

from app.cli.chat import EXIT_INTERRUPTED, EXIT_MODEL, EXIT_OK, EXIT_USAGE, UserError
from app.core.files import try_hold_lock
from app.core.paths import data_paths
from app.core.units import human_size
from app.core.settings import Settings, SettingsError, SettingsFile
from app.library.gguf_info import ModelFileError
from app.library.importer import ImportCancelled, ImportFailed, import_model_file, import_model_folder
from app.library.model_details import model_details
from app.library.models import InstalledModel, ModelLibrary

# The download, the copy into the models folder, or the removal did not complete (network,
# server, wrong SHA-256, no space, a file in use); the message says what was kept.
EXIT_FILES = 7

# Where `models get` puts a download until it is imported: a folder per address, so the
# same command finds its .part again and continues. A dot-folder holds no model.json, so
# the library never lists it.
DOWNLOADS_FOLDER = ".downloads"

# info's lines in plain output: the JSON key and the words before its value.
_INFO_LABELS = (
    ("title", "title"), ("path", "path"), ("format", "format"), ("architecture", "architecture"),
    ("parameters", "parameters"), ("parameters_label", "size label"), ("quantization", "quantization"), ("file_size", "file size"),
    ("layers", "layers"), ("context_length", "context length"), ("embedding_length", "embedding size"),
    ("attention_heads", "attention heads"), ("kv_heads", "key/value heads"), ("head_size", "head size"),
    ("vocab_size", "vocabulary"), ("chat_template", "chat template"), ("license", "license"),
    ("license_link", "license link"), ("decoder_file", "decoder file"), ("providers", "providers"),
    ("source", "source"), ("sha256", "SHA-256"), ("default", "default"),
)
_ADD_ONE = ("Add one with: kestrel models add PATH (a .gguf file or an ONNX model folder), or "
            "download one with: kestrel models get URL.")
# The downloader words its advice for the window; here the command is the way.
_CLI_WORDS = (
    ('then use "Import a model file…"', "then add it with: kestrel models add PATH"),
    ("the one the catalog gives for it", "the one given with --sha256"),
)

T = TypeVar("T")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = commands.add_parser("models", help="list, inspect, add, remove or download models")
    actions = models.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the installed models, the default marked")
    listing.add_argument("--json", action="store_true", help="one JSON object per model and line")
    listing.set_defaults(run=run, handler=_list)
    info = actions.add_parser("info", help="what a model's file says, read without loading it")
    info.add_argument("model", metavar="ID", help="an installed model's id (see models list), or a path")
    info.add_argument("--json", action="store_true", help="the details as one JSON object")
    info.set_defaults(run=run, handler=_info)
    add = actions.add_parser("add", help="copy a GGUF file or an ONNX Runtime GenAI folder into the library")
    add.add_argument("path", metavar="PATH", help="a .gguf file or an ONNX model folder")
    add.set_defaults(run=run, handler=_add)
    remove = actions.add_parser("remove", help="delete an installed model from the models folder")
    remove.add_argument("model", metavar="ID", help="the model's id (see models list)")
    remove.set_defaults(run=run, handler=_remove)
    get = actions.add_parser("get", help="download a GGUF file (resumable, verified) and add it")
    get.add_argument("url", metavar="URL", help="an http:// or https:// address of a .gguf file")
    get.add_argument("--name", help="the file name to save it as (default: the last part of the URL)")
    get.add_argument("--sha256", metavar="HEX", help="the file's SHA-256; the download must match it")
    get.set_defaults(run=run, handler=_get)


def run(args: argparse.Namespace) -> int:
    """Run the chosen action; a problem the user can fix becomes its message and exit status."""
    for stream in (sys.stdout, sys.stderr):
        # A Windows console in a legacy code page must not crash on a model's title.
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    as_json = getattr(args, "json", False)
    try:
        status: int = args.handler(args)
        return status
    except UserError as exc:
        return _report(exc, as_json)
    except OSError as exc:  # the disk or a permission, where no message below covers it
        where = exc.filename or "its models folder"
        return _report(UserError(f"Kestrel could not use {where}: {exc.strerror or exc}. Check that "
                                 "the disk is there and has space and that you may write to it, then "
                                 "try again.", EXIT_FILES), as_json)
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


def _report(exc: UserError, as_json: bool) -> int:
    """Say what went wrong (also as a JSON line under --json) and give its exit status."""
    if as_json:
        print(json.dumps({"type": "error", "status": exc.status, "message": str(exc)}), flush=True)
    print(f"kestrel: {exc}", file=sys.stderr, flush=True)
    return exc.status


# --- list and info ---------------------------------------------------------------------

def _list(args: argparse.Namespace) -> int:
    library, settings = _library(), _settings()[1]
    installed = library.list()
    default = library.default(settings.default_model)
    if not installed:
        print(f"No model is installed. {_ADD_ONE}", file=sys.stderr)
        return EXIT_OK
    rows = [_listing(model, default is not None and model.id == default.id) for model in installed]
    if args.json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return EXIT_OK
    id_width = max(len(row["id"]) for row in rows)
    for row in rows:
        mark = "  (default)" if row["default"] else ""
        print(f"{row['id']:<{id_width}}  {row['format']:<4}  {human_size(row['size']):>8}  {row['title']}{mark}")
    return EXIT_OK


def _listing(model: InstalledModel, is_default: bool) -> dict[str, Any]:
    return {"id": model.id, "title": model.title, "format": "onnx" if model.path.is_dir() else "gguf",
            "size": model.size, "default": is_default, "path": str(model.path)}


def _info(args: argparse.Namespace) -> int:
    library, settings = _library(), _settings()[1]
    model, path = _model_or_path(library, args.model)
    try:
        details = model_details(path)
    except ModelFileError as exc:  # ModelFolderError too
        raise UserError(exc.message, EXIT_MODEL) from None
    default = library.default(settings.default_model)
    name = details.pop("name", None)
    shown: dict[str, Any] = {"id": model.id if model else None,
                             "title": model.title if model else name or path.name,
                             "path": str(path), **details}
    if model is not None:
        shown.update(source=model.source, sha256=model.sha256, default=default == model)
    shown = {key: value for key, value in shown.items() if value is not None}
    if args.json:
        print(json.dumps(shown, ensure_ascii=False))
    else:
        print(shown.get("id") or path.name)
        for key, label in _INFO_LABELS:
            if key in shown:
                print(f"  {label + ':':<17}{_plain(key, shown[key])}")
    return EXIT_OK


def _plain(key: str, value: Any) -> str:
    if key == "file_size":
        return human_size(value) if value < 1000 else f"{human_size(value)} ({value:,} bytes)"
    if key == "parameters_label":
        return f"{value} (as the file labels it)"
    if key == "parameters":
        return f"{value:,} ({_count_words(value)}, counted from the tensors)"
    if key == "context_length":
        return f"{value:,} tokens (as trained)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "providers":
        return ", ".join(value) if value else "none named (the CPU)"
    return f"{value:,}" if isinstance(value, int) else str(value)


# --- add and remove --------------------------------------------------------------------

def _add(args: argparse.Namespace) -> int:
    library = _library()
    started = time.time()
    source = Path(args.path).expanduser().absolute()  # the model remembers where it came from
    model = _copy_in(library, source)
    if model.added < started:
        print(f"kestrel: {Path(args.path).name} is already installed as {model.id}.", file=sys.stderr)
    print(model.id)
    return EXIT_OK


def _copy_in(library: ModelLibrary, source: Path) -> InstalledModel:
    """The window's import (same checks, same messages), with progress and Ctrl+C."""
    importer = import_model_folder if source.is_dir() else import_model_file
    line = _ProgressLine(sys.stderr)
    cancel = threading.Event()

    def report(done: int, total: int) -> None:
        line.show(f"Copying {source.name} into the models folder: {done * 100 // max(total, 1)}%")

    try:
        return _in_worker(lambda: importer(library, source, report, cancel.is_set), cancel.set)
    except ModelFileError as exc:
        raise UserError(exc.message, EXIT_MODEL) from None
    except ImportFailed as exc:
        raise UserError(str(exc), EXIT_FILES) from None
    except ImportCancelled:
        raise UserError(f"Cancelled: {source.name} was not added, and nothing of it was left "
                        "in the models folder.", EXIT_INTERRUPTED) from None
    finally:
        line.end()


def _remove(args: argparse.Namespace) -> int:
    library = _library()
    model = library.find(args.model)
    if model is None:
        raise UserError(_not_installed(args.model, removing=True), EXIT_MODEL)
    settings_file, settings = _settings()
    chosen = library.find(settings.default_model) if settings.default_model else None
    try:
        removed = library.remove(model)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise UserError(f"Could not remove {model.id}: {exc.strerror or exc}{where}. If Kestrel's "
                        "window or a chat is using the model, close it, then run the same command "
                        "again.", EXIT_FILES) from None
    print(f'Removed {model.id} ("{model.title}"); {human_size(removed.freed)} of disk space freed.')
    if removed.left:
        print(f"Left in {model.path.parent}: {', '.join(removed.left)} (Kestrel did not write "
              "them, so it did not delete them).")
    if chosen is not None and chosen.id == model.id:
        _clear_default(settings_file, settings, library)
    return EXIT_OK


def _clear_default(settings_file: SettingsFile, settings: Settings, library: ModelLibrary) -> None:
    try:
        settings_file.save(dataclasses.replace(settings, default_model=None))
    except SettingsError as exc:  # the model is gone all the same; a missing default is skipped
        print(f"kestrel: {exc}", file=sys.stderr)
    following = library.default(None)
    if following is None:
        print(f"It was the default model. No model is installed now. {_ADD_ONE}")
    else:
        print(f"It was the default model; {following.id} (the oldest installed) is used now "
              "when no model is named.")


def _model_or_path(library: ModelLibrary, given: str) -> tuple[InstalledModel | None, Path]:
    """An installed model by id or path, or a model file or folder that is not installed."""
    found = library.find(given)
    if found is not None:
        return found, found.path
    if os.path.lexists(given) or "/" in given or os.sep in given or given.lower().endswith(".gguf"):
        return None, Path(given)  # reading it says what is wrong with it, if anything
    raise UserError(_not_installed(given, removing=False), EXIT_MODEL)


def _not_installed(given: str, removing: bool) -> str:
    if removing and os.path.lexists(given):
        return (f"{given} is not in Kestrel's library, so there is nothing to remove: Kestrel "
                "deletes only models it copied into its models folder. Run kestrel models list "
                "to see the ids of those.")
    what = "" if removing else ", or give the path of a model file or folder"
    return f'No installed model has the id "{given}". Run kestrel models list to see the ids{what}.'


# --- get -------------------------------------------------------------------------------

def _get(args: argparse.Namespace) -> int:
    # Imported here: every other command, chat and doctor must not even load the network code.
    from app.library.download import DownloadError
    from app.library.download.transport import check_scheme

    try:
        check_scheme(args.url)
    except DownloadError as exc:
        raise UserError(exc.message, EXIT_USAGE) from None
    name = _download_name(args.url, args.name)
    expected = _sha256_argument(args.sha256)
    library = _library()
    folder = library.root / DOWNLOADS_FOLDER / hashlib.sha256(args.url.encode()).hexdigest()[:16]
    lock = folder.with_name(folder.name + ".lock")
    held = try_hold_lock(lock)
    if held is None:  # two writers appending to one .part would only make a damaged file
        raise UserError(f"Another Kestrel is already downloading {args.url}. Let it finish (or stop "
                        "it with Ctrl+C), then run this command again.", EXIT_FILES)
    try:
        model = _fetch_and_add(library, args.url, folder / name, expected)
    finally:
        held.release()
        lock.unlink(missing_ok=True)
        _remove_if_empty(folder)
        _remove_if_empty(folder.parent)
    print(model.id)
    return EXIT_OK


def _fetch_and_add(library: ModelLibrary, url: str, file: Path, expected: str | None) -> InstalledModel:
    """Download (or finish downloading) url into file, then add it as `models add` does.

    A complete file kept because adding it failed (no space, Ctrl+C) is added without
    downloading it again.
    """
    if not file.is_file() or file.with_name(file.name + ".part").exists():
        _download(url, file, expected)
    elif expected is not None and _file_sha256(file) != expected:
        shutil.rmtree(file.parent, ignore_errors=True)
        raise UserError(f"{file.name}, kept from an earlier download, does not match --sha256, so "
                        "it was deleted. Run the command again to download it afresh.", EXIT_FILES)
    started = time.time()
    try:
        model = _copy_in(library, file)
    except UserError as exc:
        if exc.status == EXIT_MODEL:  # not a model: keeping it helps nobody
            shutil.rmtree(file.parent, ignore_errors=True)
            raise UserError(f"{exc} The downloaded file was deleted.", EXIT_MODEL) from None
        raise UserError(f"{exc} The download is kept: run the same command again to add it "
                        "without downloading it again.", exc.status) from None
    shutil.rmtree(file.parent, ignore_errors=True)
    if model.added < started:
        print(f"kestrel: {file.name} is already installed as {model.id}.", file=sys.stderr)
        return model
    return library.register(model.id, model.path, title=model.title, sha256=model.sha256,
                            source=f"downloaded from {url}")


def _download(url: str, file: Path, expected: str | None) -> None:
    """Fetch url into file through the verified, resumable downloader, with a progress line;
    Ctrl+C stops it and keeps the .part for the same command to continue from."""
    from app.library.download import (DownloadControl, DownloadError, DownloadErrorKind,
                                      DownloadStopped, FileSpec, UnitDownload)

    control = DownloadControl()
    line = _ProgressLine(sys.stderr)
    download = UnitDownload([FileSpec(url, file.name, sha256=expected)], file.parent, control,
                            progress=lambda p: line.show(_download_text(p.file, p.done, p.total,
                                                                        p.bytes_per_second, p.seconds_left)))
    try:
        [done] = _in_worker(download.run, control.stop)
    except DownloadStopped:
        kept = human_size(_length(file.with_name(file.name + ".part")))
        raise UserError(f"Download stopped; what arrived ({kept}) is kept. Run the same command "
                        "again to continue from there.", EXIT_INTERRUPTED) from None
    except DownloadError as exc:
        if exc.kind == DownloadErrorKind.CHANGED:
            raise UserError(f"The server states a SHA-256 for {file.name} that is not the one "
                            "given with --sha256, so nothing was downloaded. Check the hash, or "
                            "leave --sha256 out to check against the server's.", EXIT_FILES) from None
        raise UserError(_in_cli_words(exc.message), EXIT_FILES) from None
    finally:
        line.end()  # before the message run() prints
    checked = _checked(done.verified_sha256, done.verified_size, expected)
    print(f"Downloaded {file.name} ({human_size(done.size)}); {checked}.", file=sys.stderr, flush=True)


def _checked(sha256: bool, size: bool, expected: str | None) -> str:
    """How a finished download was verified, in words."""
    if sha256:
        return "its SHA-256 matches --sha256" if expected else "its SHA-256 matches the one the server stated"
    if size:
        return "the server stated no SHA-256, so only its size was checked"
    return "the server stated neither its size nor its SHA-256, so nothing was checked"


def _download_text(name: str, done: int, total: int | None, speed: float, left: float | None) -> str:
    amount = f"{human_size(done)} of {human_size(total)} ({done * 100 // max(total, 1)}%)" if total else human_size(done)
    pace = f" at {human_size(int(speed))}/s" if speed > 0 else ""
    remaining = f", {_duration(left)} left" if left is not None else ""
    return f"Downloading {name}: {amount}{pace}{remaining}"


def _download_name(url: str, given: str | None) -> str:
    """The file name to save as: --name, else the URL's last part; UserError if unusable."""
    name = given if given is not None else unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    plain = bool(name) and name == Path(name).name and not any(c in name for c in "\\\0")
    if plain and not name.startswith(".") and len(name.encode("utf-8", "replace")) <= 200:
        return name
    if given is not None:
        raise UserError(f'--name "{given}" is not a file name Kestrel can save as: give a name '
                        "without folders that does not start with a dot, such as model.gguf.", EXIT_USAGE)
    raise UserError(f"The address {url} does not end in a file name Kestrel can save as. Give "
                    "one with --name, such as --name model.gguf.", EXIT_USAGE)


def _sha256_argument(given: str | None) -> str | None:
    if given is None:
        return None
    digest = given.strip().lower()
    if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
        return digest
    raise UserError(f'--sha256 "{given}" is not a SHA-256: it must be 64 hexadecimal digits '
                    "(0-9, a-f), as sha256sum prints them.", EXIT_USAGE)


def _in_cli_words(message: str) -> str:
    for window, command in _CLI_WORDS:
        message = message.replace(window, command)
    return message


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _length(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty, or not there: nothing to tidy
        pass


# --- shared ----------------------------------------------------------------------------

def _library() -> ModelLibrary:
    return ModelLibrary(data_paths().ensure().models)


def _settings() -> tuple[SettingsFile, Settings]:
    """The settings file and what it holds; a damaged one is set aside and said, as chat does."""
    settings_file = SettingsFile(data_paths().settings_file)
    settings = settings_file.load()
    if settings_file.last_problem:
        print(f"kestrel: {settings_file.last_problem}", file=sys.stderr)
    return settings_file, settings


def _in_worker(work: Callable[[], T], interrupt: Callable[[], None]) -> T:
    """Run work on a thread of its own, so Ctrl+C reaches this one and can ask it to end.

    interrupt() asks work to finish early (cancel a copy, stop a download); what work
    then raises or returns is what comes back. A second Ctrl+C is not caught: __main__
    says "Interrupted." and the process ends without waiting.
    """
    outcome: list[tuple[bool, Any]] = []
    finished = threading.Event()

    def target() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the main thread, which raises it
            outcome.append((False, exc))
        finally:
            finished.set()

    # An Event, not Thread.join: a join cut short by Ctrl+C can leave is_alive() False
    # while the thread still runs.
    threading.Thread(target=target, name="kestrel models", daemon=True).start()
    try:
        while not finished.wait(0.2):
            pass
    except KeyboardInterrupt:
        interrupt()
        while not finished.wait(0.2):
            pass
    succeeded, value = outcome[0]
    if succeeded:
        result: T = value
        return result
    raise value


class _ProgressLine:
    """Progress on standard error: one line redrawn in place on a terminal; anywhere else
    (a log file, a CI job) a line every few seconds, so the log stays readable, and none
    for work done within the first second."""

    EVERY_S = 5.0
    FIRST_S = 1.0

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        try:
            self._terminal = stream.isatty()
        except (AttributeError, ValueError):
            self._terminal = False
        self._last = time.monotonic() - self.EVERY_S + self.FIRST_S
        self._drawn = 0
        self._lock = threading.Lock()

    def show(self, text: str) -> None:
        with self._lock:
            if self._terminal:
                # A line wider than the terminal wraps, and \r then redraws only its end.
                text = text[:shutil.get_terminal_size().columns - 1]
                self._stream.write("\r" + text.ljust(self._drawn))
                self._drawn = len(text)
            elif time.monotonic() - self._last >= self.EVERY_S:
                self._last = time.monotonic()
                self._stream.write(text + "\n")
            self._stream.flush()

    def end(self) -> None:
        """Finish the redrawn line, so what is written next starts on a line of its own."""
        with self._lock:
            if self._drawn:
                self._stream.write("\n")
                self._stream.flush()
            self._drawn = 0


def _count_words(count: int) -> str:
    """270,000,000 as "270M", 7,240,000,000 as "7.2B": how model sizes are spoken of."""
    for limit, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if count >= limit:
            value = count / limit
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(count)


def _duration(seconds: float) -> str:
    whole = int(seconds + 0.5)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
