"""`python -m app models get` and `models catalog`: download a model (resumable, verified)
straight into the library, and list the models the catalog offers.

Nothing here opens a socket until the user runs `get`: the downloader and the Hugging Face
lister are imported inside it, not with this module.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from app.cli.user_error import EXIT_INTERRUPTED, EXIT_MODEL, EXIT_OK, EXIT_USAGE, UserError
from app.cli.models.models_catalog import add_arguments as add_catalog_arguments, list_catalog
from app.cli.models.models_common import CLI_IMPORT_STEP, EXIT_FILES, ProgressLine, in_worker, open_library
from app.core.units import human_size
from app.library.catalog import find_entry, load_catalog
from app.library.huggingface.file_names import shown

if TYPE_CHECKING:
    from app.library.download import DownloadedFile
    from app.library.huggingface.hub import DownloadUnit
    from app.voice.catalog.entries import SpeechEntry

_Got = TypeVar("_Got")
# The downloader says whose SHA-256 a file failed; a hash given with --sha256 goes in as
# the catalog's (_with_sha256), so the words are put right here.
_SHA256_WORDS = ("the one the catalog gives for it", "the one given with --sha256")


def add_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser], run: Any) -> None:
    get = actions.add_parser("get", help="download a model (a catalog id, a Hugging Face repository "
                                         "or a URL), verified and resumable, and add it")
    get.add_argument("what", metavar="CATALOG-ID|HF-REPO[@QUANT]|URL",
                     help="an id from `models catalog`, a Hugging Face repository (owner/name, with "
                          "@Q4_K_M or another quantization to pick its file) or its address, or an "
                          "http:// or https:// address of a .gguf file")
    get.add_argument("--file", metavar="NAME",
                     help="which file (or ONNX folder) of a repository to download")
    get.add_argument("--name", help="the file name to save a plain address's file as "
                                    "(default: the last part of the URL)")
    get.add_argument("--sha256", metavar="HEX", help="the file's SHA-256; the download must match it")
    get.set_defaults(run=run, handler=_get)
    catalog = actions.add_parser("catalog", help="list the models Kestrel offers to download, with how each "
                                                 "would run here and the one recommended for this machine")
    add_catalog_arguments(catalog)
    catalog.set_defaults(run=run, handler=list_catalog)


def _get(args: argparse.Namespace) -> int:
    # Imported here: every other command, chat and doctor must not even load the network code.
    from app.library.fetch import FetchRefused, fetch_unit
    from app.voice.catalog.entries import speech_catalog

    speech = next((entry for entry in speech_catalog() if entry.id.lower() == args.what.strip().lower()), None)
    if speech is not None:
        return _get_speech(speech)
    expected = _sha256_argument(args.sha256)
    line = _Telling(sys.stderr)
    try:
        unit = _with_sha256(_unit_for(args, line.step), expected)
    finally:
        line.end()
    library = open_library()
    try:
        fetched = _fetched(line, unit, partial(fetch_unit, library, unit), lambda: _kept(library, unit), expected)
    except FetchRefused as exc:
        raise UserError(exc.message, EXIT_MODEL if exc.kind == "not_a_model" else EXIT_FILES) from None
    if fetched.already_installed:
        print(f"kestrel: {shown(unit.title)} is already installed as {fetched.model.id}.", file=sys.stderr)
    else:
        checked = _checked(fetched.files, expected,
                           unit.files[0].stated_by if unit.files[0].sha256 else None)
        print(f"Downloaded {shown(unit.title)} ({human_size(fetched.model.size)}); {checked}.",
              file=sys.stderr, flush=True)
    print(fetched.model.id)
    return EXIT_OK


def _get_speech(entry: SpeechEntry) -> int:
    """A catalog speech model or voice, downloaded into the speech folder (Models → Speech in the window)."""
    from app.core.paths import data_paths
    from app.voice.catalog.fetch import SpeechFetchRefused, fetch_speech, speech_parts_size, speech_unit

    unit = speech_unit(entry)
    folder = data_paths().ensure().data / "speech"
    try:
        fetched = _fetched(_Telling(sys.stderr), unit, partial(fetch_speech, folder, unit),
                           lambda: speech_parts_size(folder, unit), None)
    except SpeechFetchRefused as exc:
        raise UserError(exc.message, EXIT_FILES) from None
    use = "--model" if entry.kind == "transcription" else "--voice"
    where = "kestrel transcribe FILE" if entry.kind == "transcription" else "kestrel say TEXT"
    if fetched.already_installed:
        print(f"kestrel: {entry.name} is already downloaded.", file=sys.stderr)
    else:
        print(f"Downloaded {entry.name} ({human_size(fetched.size)}); every file's SHA-256 was checked. Use it "
              f"with: {where} {use} {entry.id}, or choose it in File → Settings… → Voice.", file=sys.stderr,
              flush=True)
    print(entry.id)
    return EXIT_OK


def _fetched(line: _Telling, unit: DownloadUnit, fetch: Callable[..., _Got], kept: Callable[[], int],
             expected: str | None) -> _Got:
    """fetch(control=, progress=, steps=) run on a worker thread, its progress drawn on line (ended before any
    message); a stop or a failure as a UserError, with what arrived and is kept."""
    from app.library.download import DownloadControl, DownloadError, DownloadStopped

    control = DownloadControl()

    def show(p: Any) -> None:
        line.show(_download_text(p.file, p.done, p.total, p.bytes_per_second, p.seconds_left))

    try:
        return in_worker(lambda: fetch(control=control, progress=show, steps=line.step), control.stop)
    except DownloadStopped:
        raise UserError(f"Download stopped; what arrived ({human_size(kept())}) is kept. Run the same command "
                        "again to continue from there.", EXIT_INTERRUPTED) from None
    except DownloadError as exc:
        raise UserError(_failure_words(exc, unit, expected), EXIT_FILES) from None
    finally:
        line.end()  # before the message run() prints


class _Telling:
    """What `get` is doing, on standard error from its first step: each step before the first
    byte ("Looking up huggingface.co…") and the first byte's progress at once, then progress
    as ProgressLine draws it (redrawn on a terminal, a line every few seconds in a log)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._line = ProgressLine(stream)
        try:
            self._terminal = stream.isatty()
        except (AttributeError, ValueError):
            self._terminal = False
        self._flowing = False
        self._last_step = ""

    def step(self, words: str) -> None:
        self._flowing = False
        if words == self._last_step:
            return
        self._last_step = words
        if self._terminal:
            self._line.show(words)
        else:
            self._stream.write(words + "\n")
            self._stream.flush()

    def show(self, text: str) -> None:
        first = not self._flowing
        self._flowing, self._last_step = True, ""
        if first and not self._terminal:
            self._stream.write(text + "\n")
            self._stream.flush()
        else:
            self._line.show(text)

    def end(self) -> None:
        self._line.end()


def _unit_for(args: argparse.Namespace, steps: Any = None) -> DownloadUnit:
    """The unit the argument names: a catalog id, else what the Hub lister makes of it."""
    from app.library.download import DownloadError
    from app.library.huggingface.hub import HubError, UnsafeNames, catalog_unit, choose, units_for

    entry = find_entry(load_catalog(), args.what)
    if entry is not None:
        return catalog_unit(entry)
    text, quant = _quant_suffix(args.what)
    if quant is not None and args.file is not None:
        raise UserError(f"Give either @{shown(quant)} or --file, not both: each picks one file.", EXIT_USAGE)
    what = shown(text, 300)
    try:
        units = units_for(text, name=args.name, steps=steps)
    except UnsafeNames as exc:
        raise UserError(str(exc), EXIT_MODEL) from None
    except HubError as exc:
        hint = "Give one with --name, such as --name model.gguf." if args.name is None and \
            "does not end in a file name" in str(exc) else "To see the catalog's models: kestrel models catalog"
        raise UserError(f"{exc} {hint}", EXIT_USAGE) from None
    except DownloadError as exc:
        raise UserError(exc.words(CLI_IMPORT_STEP), EXIT_FILES) from None
    if not units:
        raise UserError(f"{what} holds no GGUF file and no ONNX Runtime GenAI folder "
                        f"(one with genai_config.json), so nothing in it is a model Kestrel can "
                        f"run.", EXIT_MODEL)
    if quant is not None:
        return _by_quantization(units, quant, what)
    if args.file is not None:
        chosen = choose(units, args.file)
        if chosen is None:
            raise UserError(f'{what} has no file or folder named "{shown(args.file)}". It offers:\n'
                            f"{_choices(units)}", EXIT_USAGE)
        return chosen
    if len(units) > 1:
        raise UserError(f"{what} offers {len(units)} models; choose one with --file NAME:\n"
                        f"{_choices(units)}", EXIT_USAGE)
    return units[0]


def _quant_suffix(what: str) -> tuple[str, str | None]:
    """"owner/name@Q4_K_M" as the repository and the quantization; anything else as given."""
    repo, at, quant = what.strip().rpartition("@")
    if not at or "://" in what or repo.count("/") != 1 or not quant:
        return what, None
    return repo, quant


def _by_quantization(units: tuple[DownloadUnit, ...], quant: str, what: str) -> DownloadUnit:
    """The file (or ONNX folder) whose name states quant, in any case (the smallest of several)."""
    from app.library.huggingface.hub_search import choices_of, offered_quantizations, pick_quantization

    choices = choices_of(units)
    chosen = pick_quantization(choices, quant)
    if chosen is not None:
        return chosen.unit
    offered = offered_quantizations(choices)
    if not offered:
        raise UserError(f"{what} names no quantization in its file names; choose a file with --file NAME:\n"
                        f"{_choices(units)}", EXIT_USAGE)
    raise UserError(f"{what} offers no {shown(quant.upper())} file. It offers: {', '.join(offered)}. "
                    f"For example: kestrel models get {what}@{offered[0]}", EXIT_USAGE)


def _choices(units: tuple[DownloadUnit, ...]) -> str:
    lines = []
    for unit in units:
        size = f"  {human_size(unit.size)}" if unit.size is not None else ""
        lines.append(f"  {shown(unit.key)}{size}{shown(unit.parts_words)}")
    return "\n".join(lines)


def _with_sha256(unit: DownloadUnit, expected: str | None) -> DownloadUnit:
    from dataclasses import replace

    if expected is None:
        return unit
    if len(unit.files) > 1:
        raise UserError(f"{shown(unit.title)} is {len(unit.files)} files, and --sha256 gives the hash of "
                        "one: leave it out (each file is checked against the hash the server "
                        "states).", EXIT_USAGE)
    return replace(unit, files=(replace(unit.files[0], sha256=expected, stated_by="the catalog"),))


def _failure_words(exc: Any, unit: DownloadUnit, expected: str | None) -> str:
    from app.library.download import DownloadErrorKind

    if exc.kind == DownloadErrorKind.CHANGED and expected is not None:
        return (f"The server states a SHA-256 for {unit.files[0].name} that is not the one "
                "given with --sha256, so nothing was downloaded. Check the hash, or leave "
                "--sha256 out to check against the server's.")
    message: str = exc.words(CLI_IMPORT_STEP)
    return message.replace(*_SHA256_WORDS) if expected is not None else message


def _kept(library: Any, unit: DownloadUnit) -> int:
    from app.library.fetch import unit_folder

    folder = unit_folder(library, unit, claim=False)
    if folder is None:
        return 0
    return sum(p.lstat().st_size for p in folder.rglob("*.part") if p.is_file() and not p.is_symlink())


def _checked(files: tuple[DownloadedFile, ...], expected: str | None, stated_by: str | None) -> str:
    """How a finished download was verified, in words; stated_by gave the hashes, if not the server."""
    which = "its" if len(files) == 1 else "every file's"
    if all(f.verified_sha256 for f in files):
        if expected:
            return f"{which} SHA-256 matches --sha256"
        return f"{which} SHA-256 matches the one {stated_by + ' gives' if stated_by else 'the server stated'}"
    if all(f.verified_sha256 or f.verified_size for f in files):
        return "the server stated no SHA-256 for some of it, so only sizes were checked there" \
            if len(files) > 1 else "the server stated no SHA-256, so only its size was checked"
    return "the server stated neither size nor SHA-256 for all of it, so not all was checked"


def _download_text(name: str, done: int, total: int | None, speed: float, left: float | None) -> str:
    amount = f"{human_size(done)} of {human_size(total)} ({done * 100 // max(total, 1)}%)" if total else human_size(done)
    pace = f" at {human_size(int(speed))}/s" if speed > 0 else ""
    remaining = f", {_duration(left)} left" if left is not None else ""
    return f"Downloading {name}: {amount}{pace}{remaining}"


def _sha256_argument(given: str | None) -> str | None:
    if given is None:
        return None
    digest = given.strip().lower()
    if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
        return digest
    raise UserError(f'--sha256 "{given}" is not a SHA-256: it must be 64 hexadecimal digits '
                    "(0-9, a-f), as sha256sum prints them.", EXIT_USAGE)


def _duration(seconds: float) -> str:
    whole = int(seconds + 0.5)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
