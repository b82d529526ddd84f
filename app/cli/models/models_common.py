"""What the `models` commands share: the library and settings they use, progress on the
terminal, work on a thread that Ctrl+C can stop, the copy into the models folder and the
adding of models kept where they are."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TextIO, TypeVar

from app.cli.user_error import EXIT_INTERRUPTED, EXIT_MODEL, EXIT_OK, UserError
from app.cli.terminal_text import shown_path, terminal_line
from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.library.model_files.gguf_info import ModelFileError
from app.library.importer import ImportCancelled, ImportFailed, import_model_file, import_model_folder
from app.library.installed import InstalledModel
from app.library.models import ModelLibrary
from app.library.scan import ScanCancelled

# The download, the copy into the models folder, or the removal did not complete (network,
# server, wrong SHA-256, no space, a file in use); the message says what was kept.
EXIT_FILES = 7
# How the CLI adds a file the user downloaded in a browser (the downloader's advice names
# the window's way: DownloadError.words puts this one in its place).
CLI_IMPORT_STEP = "add it with: kestrel models add PATH"

T = TypeVar("T")


def open_library() -> ModelLibrary:
    return ModelLibrary(data_paths().ensure().models)


def load_settings() -> tuple[SettingsFile, Settings]:
    """The settings file and what it holds; a damaged one is set aside and said, as chat does."""
    settings_file = SettingsFile(data_paths().settings_file)
    settings = settings_file.load()
    if settings_file.last_problem:
        print(f"kestrel: {settings_file.last_problem}", file=sys.stderr)
    return settings_file, settings


def in_worker(work: Callable[[], T], interrupt: Callable[[], None]) -> T:
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


class ProgressLine:
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


def copy_in(library: ModelLibrary, source: Path) -> InstalledModel:
    """The window's import (same checks, same messages), with progress and Ctrl+C."""
    importer = import_model_folder if source.is_dir() else import_model_file
    line = ProgressLine(sys.stderr)
    cancel = threading.Event()

    def report(done: int, total: int) -> None:
        line.show(f"Copying {source.name} into the models folder: {done * 100 // max(total, 1)}%")

    try:
        return in_worker(lambda: importer(library, source, report, cancel.is_set), cancel.set)
    except ModelFileError as exc:
        raise UserError(exc.message, EXIT_MODEL) from None
    except ImportFailed as exc:
        raise UserError(str(exc), EXIT_FILES) from None
    except ImportCancelled:
        raise UserError(f"Cancelled: {source.name} was not added, and nothing of it was left "
                        "in the models folder.", EXIT_INTERRUPTED) from None
    finally:
        line.end()


def reference(library: ModelLibrary, source: Path) -> InstalledModel:
    """Add a model where it is (`models add --reference`): same checks and messages as a copy."""
    try:
        return library.add_reference(source)
    except ModelFileError as exc:
        raise UserError(exc.message, EXIT_MODEL) from None


def add_folder(library: ModelLibrary, folder: Path) -> int:
    """Look through a folder and the folders in it, keep each model found where it is, and
    say what was added (ids on standard output), what was there already and what was not
    a model, with why."""
    line = ProgressLine(sys.stderr)
    cancel = threading.Event()

    def report(count: int, where: Path) -> None:
        line.show(f"Looking through {shown_path(folder)}: {count:,} folders, now {terminal_line(where.name or str(where))}")

    try:
        scan = in_worker(lambda: library.add_folder(folder, report, cancel.is_set), cancel.set)
    except ScanCancelled:
        raise UserError(f"Cancelled: nothing from {shown_path(folder)} was added.", EXIT_INTERRUPTED) from None
    finally:
        line.end()
    for path, reason in scan.skipped:
        print(f"kestrel: skipped {shown_path(path)}: {terminal_line(reason)}", file=sys.stderr)
    if not scan.added and not scan.known:
        raise UserError(f"No model was found in {shown_path(folder)} or the folders in it. A model is a .gguf "
                        "file, or a folder with an ONNX Runtime GenAI model (genai_config.json, the "
                        "model and its tokenizer).", EXIT_MODEL)
    if scan.known:
        print(f"kestrel: already in the library: {', '.join(m.id for m in scan.known)}.", file=sys.stderr)
    if scan.added:
        print(f"kestrel: added {_models(len(scan.added))} found in {shown_path(folder)}; they stay where they "
              "are, and removing one only makes Kestrel forget it.", file=sys.stderr)
    for model in scan.added:
        print(model.id)
    return EXIT_OK


def _models(count: int) -> str:
    return "1 model" if count == 1 else f"{count:,} models"
