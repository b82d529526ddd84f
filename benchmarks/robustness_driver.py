"""A front end without a window for benchmarks/robustness.py: Kestrel's service (its chat door) over
the real history of $KESTREL_HOME, driven from standard input, saying what it did on
standard output (one flushed line per event), so that the campaign can SIGKILL it, or its
engine, at any moment and then check the history against what was reported.

    python benchmarks/robustness_driver.py [--loop] [--run NAME]

Lines out:  ready <model state> <engine pid> | committed <user message id> |
            started <answer id> <engine pid> | streaming <answer id> <engine pid> |
            finished <answer id> | interrupted <answer id> <reason> |
            state <model state> <engine pid> | damaged | stopping | bye
Lines in:   send | stop | quit   (end of input is quit)

--loop sends one message after another until quit (or a kill); without it, each `send`
sends one. The answers' length is the home's settings file's. The window has no way to
be driven from outside; this is the same service and chat door it runs, over the same files, so
a kill here is a kill of the app's storage and engine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.conversation import Role  # noqa: E402
from app.core.paths import data_paths  # noqa: E402
from app.library.models import ModelLibrary  # noqa: E402
from app.service import events as ev  # noqa: E402
from app.service.doors.chat import ChatDoor  # noqa: E402
from app.service.models.client import EngineClient  # noqa: E402
from app.service.root import Service  # noqa: E402

# Text of an answer streamed before it counts as "streaming" (a kill then lands mid-answer).
STREAMING_CHARS = 20
# A new conversation every so many messages, so that conversations and messages both grow.
PER_CONVERSATION = 6


def say(*words: object) -> None:
    print(" ".join(str(word) for word in words), flush=True)


class Reporter:
    """Turns the service's events into the lines above (with the engine's pid, for the campaign's kills)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.grown: dict[int, int] = {}
        service.subscribe(self.on_event)

    def pid(self) -> object:
        return self.service.session.client.pid

    def on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.MessageAdded) and event.message.role == Role.USER:
            say("committed", event.message.id)
        elif isinstance(event, ev.AnswerStarted):
            self.grown[event.message.id] = 0
            say("started", event.message.id, self.pid())
        elif isinstance(event, ev.TextGrew):
            before = self.grown.get(event.message_id, 0)
            after = self.grown[event.message_id] = before + len(event.delta)
            if before <= STREAMING_CHARS < after:
                say("streaming", event.message_id, self.pid())
        elif isinstance(event, ev.AnswerFinished):
            say("finished", event.message.id)
        elif isinstance(event, ev.AnswerInterrupted):
            say("interrupted", event.message.id, event.reason.value)
        elif isinstance(event, ev.ModelStateChanged):
            say("state", event.state.value, self.pid())
        elif isinstance(event, ev.DamagedHistoryFound):
            say("damaged")


def _read_commands(loop: asyncio.AbstractEventLoop, commands: asyncio.Queue[str]) -> None:
    for line in sys.stdin:
        loop.call_soon_threadsafe(commands.put_nowait, line.strip())
    loop.call_soon_threadsafe(commands.put_nowait, "quit")


async def _send_one(chat: ChatDoor, text: str) -> None:
    while not chat.send(text):  # busy: a Stop or a restart is still being settled
        await asyncio.sleep(0.02)
    await chat.wait_idle()


async def _send_after(before: asyncio.Future[None] | None, chat: ChatDoor, text: str) -> None:
    if before is not None:
        await asyncio.gather(before, return_exceptions=True)
    await _send_one(chat, text)


async def _loop(chat: ChatDoor, run: str) -> None:
    number = 0
    while True:
        number += 1
        if number % PER_CONVERSATION == 0:
            chat.new_conversation()
        await _send_one(chat, f"Robustness message {number} of {run}: tell me about the weather")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loop", action="store_true", help="send one message after another until quit")
    parser.add_argument("--run", default="run", help="a name put into each message")
    args = parser.parse_args()

    paths = data_paths().ensure()
    service = Service(history_path=paths.history_db, settings_path=paths.settings_file,
                      library=ModelLibrary(paths.models), client=EngineClient())
    chat = ChatDoor(service)
    reporter = Reporter(service)
    await service.start_up()
    say("ready", service.session.state.value, reporter.pid())

    commands: asyncio.Queue[str] = asyncio.Queue()
    threading.Thread(target=_read_commands, args=(asyncio.get_running_loop(), commands), daemon=True).start()
    sending = asyncio.ensure_future(_loop(chat, args.run)) if args.loop else None
    one: asyncio.Future[None] | None = None
    while True:
        command = await commands.get()
        if command == "send":
            # After the one before it: a "send" read while the last answer is still being
            # settled (its "interrupted" line printed, the line not idle yet) is not lost.
            one = asyncio.ensure_future(_send_after(one, chat, f"Robustness message of {args.run}"))
        elif command == "stop":
            say("stopping")
            chat.stop()
        elif command == "quit":
            break
    for task in (sending, one):
        if task is not None and not task.done():
            task.cancel()
    await service.shutdown()
    say("bye")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
