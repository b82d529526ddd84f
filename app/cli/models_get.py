"""`python -m app models get`: download a model (resumable, verified) and add it to the library.

Nothing here opens a socket until the user runs the command: the downloader is imported
inside it, not with this module.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from app.cli.chat import EXIT_INTERRUPTED, EXIT_MODEL, EXIT_OK, EXIT_USAGE, UserError
from app.cli.models_common import EXIT_FILES, ProgressLine, copy_in, in_worker, open_library
from app.core.files import try_hold_lock
from app.core.units import human_size
from app.library.models import InstalledModel, ModelLibrary

# Where `models get` puts a download until it is imported: a folder per address, so the
# same command finds its .part again and continues. A dot-folder holds no model.json, so
# the library never lists it.
DOWNLOADS_FOLDER = ".downloads"
# The downloader words its advice for the window; here the command is the way.
_CLI_WORDS = (
    ('then use "Import a model file…"', "then add it with: kestrel models add PATH"),
    ("the one the catalog gives for it", "the one given with --sha256"),
)


def add_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser], run: Any) -> None:
    get = actions.add_parser("get", help="download a GGUF file (resumable, verified) and add it")
    get.add_argument("url", metavar="URL", help="an http:// or https:// address of a .gguf file")
    get.add_argument("--name", help="the file name to save it as (default: the last part of the URL)")
    get.add_argument("--sha256", metavar="HEX", help="the file's SHA-256; the download must match it")
    get.set_defaults(run=run, handler=_get)


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
    library = open_library()
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
        model = copy_in(library, file)
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
    line = ProgressLine(sys.stderr)
    download = UnitDownload([FileSpec(url, file.name, sha256=expected)], file.parent, control,
                            progress=lambda p: line.show(_download_text(p.file, p.done, p.total,
                                                                        p.bytes_per_second, p.seconds_left)))
    try:
        [done] = in_worker(download.run, control.stop)
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


def _duration(seconds: float) -> str:
    whole = int(seconds + 0.5)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
