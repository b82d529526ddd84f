"""The single-instance line: how `kestrel ask` and a second launch talk to the running Kestrel.

The running window listens on a local socket named server_name(paths) (app/ui/single_instance.py,
through Qt's QLocalServer): a Unix socket in Qt's temporary folder, a named pipe on Windows,
for this user only. A request is one line of JSON, {"v": 1, "do": "activate"} or
{"v": 1, "do": "ask", "question": "…"}; the window answers {"ok": true} when it acted, and
{"ok": false} to a request of another version. A malformed line gets no answer and is dropped.
The only client is Kestrel itself (this module, and the window's own second launch), so the
one-word protocol before it (b"activate\\n") is not kept: both ends ship together.

Plain Python, no Qt: the CLI cannot import app.ui. The client's waits are bounded (connect
and answer within ANSWER_TIMEOUT_S), and a socket file a crashed window left is "not running".
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from app.core.paths import DataPaths

PROTOCOL_VERSION = 1
# A question typed or piped (`xsel -o | kestrel ask -`): about 4,000 tokens, what a small context holds.
MAX_QUESTION_CHARS = 16_000
# JSON with ensure_ascii writes a character in at most 12 bytes (an emoji as two \\u escapes):
# the longest line a well-formed request can be. The window reads no more than this.
MAX_LINE_BYTES = 12 * MAX_QUESTION_CHARS + 256
# Connect and answer: the window answers at once (it acts after answering), so a longer wait
# means its UI thread is stuck, or a window is starting and not yet listening.
ANSWER_TIMEOUT_S = 2.0
_ANSWER_BYTES = 256  # {"ok":true}: a longer answer is not ours
_OK = b'{"ok":true}\n'
_NOT_UNDERSTOOD = b'{"ok":false,"v":1}\n'


def server_name(paths: DataPaths) -> str:
    """The local socket's name: one per data folder (and so per user)."""
    digest = hashlib.sha256(str(paths.data.resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"kestrel-{digest}"


class Do(enum.Enum):
    """What a request asks the running Kestrel to do."""

    ACTIVATE = "activate"  # bring the main window forward (a second launch)
    ASK = "ask"  # summon the quick-ask window, asking the question if one is given


@dataclass(frozen=True)
class LineRequest:
    do: Do
    question: str = ""


class QuestionTooLong(ValueError):
    """The question passes MAX_QUESTION_CHARS; the message says so in words."""


@dataclass(frozen=True)
class Reading:
    """What the window makes of one line: the request to act on (None: ignore it) and the
    answer to write back (None: none, the line was not ours)."""

    request: LineRequest | None
    answer: bytes | None


def encode_request(request: LineRequest) -> bytes:
    """The request as one line; QuestionTooLong for a question past the bound."""
    if len(request.question) > MAX_QUESTION_CHARS:
        raise QuestionTooLong(f"The question is {len(request.question):,} characters long; kestrel ask takes up "
                              f"to {MAX_QUESTION_CHARS:,}. For longer text use kestrel chat - (it reads standard "
                              "input).")
    body: dict[str, object] = {"v": PROTOCOL_VERSION, "do": request.do.value}
    if request.do is Do.ASK:
        body["question"] = request.question
    # ensure_ascii: the line is ASCII whatever the question holds (a lone surrogate too).
    return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def read_request(line: bytes) -> Reading:
    """One line from a client (without its line end), read defensively: anything but a
    well-formed request of this version is acted on by no one."""
    if len(line) > MAX_LINE_BYTES:
        return Reading(None, None)
    try:
        body = json.loads(line)
    except (ValueError, RecursionError):  # not UTF-8 or not JSON; nesting past the parser's depth
        return Reading(None, None)
    if not isinstance(body, dict) or "v" not in body:
        return Reading(None, None)
    if body.get("v") != PROTOCOL_VERSION:
        return Reading(None, _NOT_UNDERSTOOD)  # a Kestrel of another version: it can say so
    try:
        do = Do(body.get("do"))
    except ValueError:
        return Reading(None, _NOT_UNDERSTOOD)
    question = body.get("question", "")
    if do is Do.ASK and (not isinstance(question, str) or len(question) > MAX_QUESTION_CHARS):
        return Reading(None, None)
    return Reading(LineRequest(do, question if do is Do.ASK else ""), _OK)


class Delivery(enum.Enum):
    """How a request to the running Kestrel went."""

    HEARD = "heard"
    NOT_RUNNING = "not running"  # nothing listens: no socket, or one a crashed window left
    NO_ANSWER = "no answer"  # something listens but did not answer in time (starting, or stuck)
    NOT_UNDERSTOOD = "not understood"  # a Kestrel of another version


def deliver(paths: DataPaths, request: LineRequest, timeout_s: float = ANSWER_TIMEOUT_S) -> Delivery:
    """Send request to the Kestrel running on these data paths, waiting at most timeout_s
    for it to connect and answer. QuestionTooLong before anything is sent."""
    data = encode_request(request)
    name = server_name(paths)
    if _on_windows():
        return deliver_over_pipe(pipe_path(name), data, timeout_s)
    return deliver_over_socket(socket_path(name), data, timeout_s)


def _on_windows() -> bool:
    """Whether Qt's local sockets are named pipes here."""
    return os.name == "nt"


def socket_path(name: str) -> Path:
    """Where Qt's QLocalServer puts a socket of this name on Linux and macOS: QDir.tempPath(),
    which is $TMPDIR, or /tmp when it is unset or empty (macOS: the user's own temporary
    folder then). Checked against a real QLocalServer in tests/ui/test_single_instance_line.py."""
    folder = os.environ.get("TMPDIR") or _darwin_temp() or "/tmp"
    return Path(folder) / name


def _darwin_temp() -> str:
    """macOS's per-user temporary folder (NSTemporaryDirectory), as Qt uses without TMPDIR."""
    if not hasattr(os, "confstr") or "CS_DARWIN_USER_TEMP_DIR" not in getattr(os, "confstr_names", {}):
        return ""
    try:
        return os.confstr("CS_DARWIN_USER_TEMP_DIR") or ""
    except (OSError, ValueError):
        return ""


def deliver_over_socket(path: Path, data: bytes, timeout_s: float) -> Delivery:
    """The exchange over a Unix socket, every wait within timeout_s."""
    deadline = time.monotonic() + timeout_s
    line = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        line.settimeout(timeout_s)
        try:
            line.connect(str(path))
        except TimeoutError:
            return Delivery.NO_ANSWER  # a listener too busy to take connections
        except OSError:  # no socket; one a dead window left (refused); a path too long for a socket
            return Delivery.NOT_RUNNING
        try:
            line.sendall(data)
            return answer_of(_read_answer(line.recv, deadline, line.settimeout))
        except OSError:  # timed out, or the window dropped the line
            return Delivery.NO_ANSWER
    finally:
        line.close()


def _read_answer(receive: Callable[[int], bytes], deadline: float,
                 set_timeout: Callable[[float], None] | None = None) -> bytes:
    """The answer line (without its end), read in at most _ANSWER_BYTES; b"" if none came."""
    answer = b""
    while b"\n" not in answer and len(answer) <= _ANSWER_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer in time")
        if set_timeout is not None:
            set_timeout(left)
        chunk = receive(_ANSWER_BYTES)
        if not chunk:
            break
        answer += chunk
    return answer.split(b"\n", 1)[0] if b"\n" in answer else b""


def answer_of(line: bytes) -> Delivery:
    """What the window's answer line (without its end) says."""
    try:
        body = json.loads(line) if line else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return Delivery.NO_ANSWER
    return Delivery.HEARD if body.get("ok") is True else Delivery.NOT_UNDERSTOOD


def pipe_path(name: str) -> str:
    """Where Qt's QLocalServer listens for a name on Windows: a named pipe."""
    return "\\\\.\\pipe\\" + name


class PipeFile(Protocol):
    """A named pipe opened as a file, as open(path, "r+b", buffering=0) gives one."""

    def write(self, data: bytes, /) -> int | None: ...
    def read(self, size: int = -1, /) -> bytes | None: ...
    def close(self) -> None: ...


def open_pipe(path: str) -> PipeFile:
    """Open a named pipe for reading and writing (Windows: CreateFile on \\\\.\\pipe\\name)."""
    return open(path, "r+b", buffering=0)


def deliver_over_pipe(path: str, data: bytes, timeout_s: float) -> Delivery:
    """The exchange over a Windows named pipe, within timeout_s.

    A pipe opened as a file has no timeouts, so the exchange runs on a daemon thread that is
    left behind if the window never answers (the command ends right after). Opening a name no
    one serves fails with ERROR_FILE_NOT_FOUND: not running; ERROR_PIPE_BUSY (every instance
    taken) is tried again until the deadline.
    """
    deadline = time.monotonic() + timeout_s
    outcome: list[Delivery] = []

    def exchange() -> None:
        pipe: PipeFile | None = None
        while pipe is None:
            try:
                pipe = open_pipe(path)
            except FileNotFoundError:
                outcome.append(Delivery.NOT_RUNNING)
                return
            except OSError:  # busy; tried again while there is time
                if time.monotonic() + 0.05 >= deadline:
                    outcome.append(Delivery.NO_ANSWER)
                    return
                time.sleep(0.05)
        try:
            pipe.write(data)
            outcome.append(answer_of(_read_answer(lambda size: pipe.read(size) or b"", deadline)))
        except OSError:
            outcome.append(Delivery.NO_ANSWER)
        finally:
            pipe.close()

    worker = threading.Thread(target=exchange, name="kestrel ask line", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()) + 0.05)
    return outcome[0] if outcome else Delivery.NO_ANSWER
