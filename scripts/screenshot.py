"""Take a screenshot of the real window with a conversation in it (for review, not tests).

    KESTREL_HOME=/tmp/shot python scripts/screenshot.py --theme dark --out dark.png

Starts the app's window on the default model (the starter, set up if needed), adds a
Markdown-rich exchange to the history, sends one real message, waits for the answer,
and saves the window. Run it under Xvfb to see what a user sees (QT_QPA_PLATFORM=xcb),
with QT_SCALE_FACTOR=2 for 200% scaling.

--show picks another view: "installed", "settings", "catalog" and "downloads" (the model manager's
cards, the first one chosen, with --add MODEL referencing a model file first, so the list has more than the starter),
"first-run" (the empty chat's offer, as a new user on the starter sees it), "empty" (a
new chat, model ready), "streaming" (grabbed while an answer is being written), "code"
(a long code answer, with other chats in the list), "picker" (the header's model menu
open; the whole screen is grabbed, as a menu is a window of its own), "hardware",
"about", "server-settings" (Settings on the API server page, other devices allowed, so
its warning shows) and "server" (the API server window after a few real requests on
127.0.0.1; it turns the server on in that KESTREL_HOME). "tools-set" --out DIR takes the tool-use
scenes of scripts/tool_scenes.py (the approval bar, an answer with tool calls, Settings → Tools). With --paste TEXT, "catalog" also looks TEXT up (a Hugging Face repository or
a link; set HF_ENDPOINT to a local server to stay offline) and shows what it found.

--show quick-ask: the quick-ask window (app/ui/quick_ask) after a real answer, summoned again with copied text
offered as a chip; only the quick-ask window is saved. --show quick-ask-approval: the quick-ask window while its
answer's tool call waits for the person's approval (scripts/quick_ask_scenes.py).

--size 800x600 sets the window's size; --wrap-code on|off saves View → Wrap long code lines first
(the long code answer at 800x600, both ways: --show code-wide --size 800x600 --wrap-code off;
"code-wide" is "code" scrolled down to its longest line).

--show window-set --out DIR takes empty, streaming, code, picker, hardware, about,
server-settings and server in one run, as DIR/<view>-<theme>-<scale>.png (scale from QT_SCALE_FACTOR). The set for the
README's review, both themes at 100% and 200%:

    for theme in light dark; do for scale in 1 2; do
      KESTREL_HOME=/tmp/shots QT_SCALE_FACTOR=$scale QT_QPA_PLATFORM=xcb \
        xvfb-run -a -s "-screen 0 2600x1700x24" python scripts/screenshot.py \
        --show window-set --theme $theme --out /tmp/shots/png; done; done
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from pathlib import Path
from typing import Any as QWidgetLike

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SAMPLE_ANSWER = """## Three ways to do it

1. **Read** the file with `open()`
2. Parse each line
3. Keep a running total

| Method | Speed | Memory |
|---|---|---|
| loop | fast | low |
| pandas | faster | high |

```python
def total(path):
    with open(path) as f:
        return sum(int(line) for line in f)
```

See [the docs](https://docs.python.org/3/) for more.
"""


async def scenario(window, service, prompt: str) -> None:
    from app.core.answer_stats import AnswerStats, FinishReason
    from app.core.conversation import Role
    from app.core.store.history import HistoryStore

    chat = window.doors.chat
    await service.start_up()
    chat.new_conversation()
    system_prompt, settings = chat.conversation_settings()
    await chat.set_conversation_settings(system_prompt, dataclasses.replace(settings, max_tokens=40, temperature=0.0))
    conversation_id = chat.conversation.id
    await window.doors.history.rename_conversation(conversation_id, "Summing numbers in a file")
    stats = AnswerStats(ttft_ms=84.0, tokens_per_s=48.2, tokens=96, device="CPU", finish_reason=FinishReason.STOP)

    def sample(store: HistoryStore) -> None:
        store.add_message(conversation_id, Role.USER, "How do I add up the numbers in a file, one per line?")
        store.add_message(conversation_id, Role.ASSISTANT, SAMPLE_ANSWER, stats=stats)

    await service.storage.history(sample)
    await chat.open_conversation(conversation_id)
    chat.send(prompt)
    await chat.wait_idle()
    await asyncio.sleep(0.3)


WINDOW_VIEWS = ("empty", "streaming", "code", "code-wide", "picker", "hardware", "about", "server-settings", "server")

LONG_CODE = "Here is the whole module, with the parser split out and typed:\n\n```python\n" + "\n".join(
    [
        "from __future__ import annotations", "", "import csv", "from dataclasses import dataclass",
        "from pathlib import Path", "", "", "@dataclass(frozen=True)", "class Reading:",
        '    """One line of the meter file."""', "", "    when: str", "    kwh: float", "", "",
        "def parse(line: str) -> Reading | None:", '    """A reading, or None for a blank or comment line."""',
        "    line = line.strip()", '    if not line or line.startswith("#"):', "        return None",
        '    when, value = line.split(",", 1)', "    return Reading(when.strip(), float(value))", "", "",
        "def readings(path: Path) -> list[Reading]:", "    found = []",
        '    with path.open(encoding="utf-8") as f:', "        for number, line in enumerate(f, 1):",
        "            try:", "                reading = parse(line)", "            except ValueError as exc:",
        '                raise ValueError(f"{path}:{number}: {exc} (expected a line like '
        '2024-01-31T23:00,1.25: when, then kWh)") from None',
        "            if reading is not None:", "                found.append(reading)", "    return found",
        "", "", "def total(path: Path) -> float:", "    return sum(r.kwh for r in readings(path))", "", "",
        'if __name__ == "__main__":', "    import sys", "", "    print(f\"{total(Path(sys.argv[1])):.2f} kWh\")",
    ]) + "\n```\n\nRun it as `python meter.py readings.csv`. Blank lines and `#` comments are skipped."


def seed_chats(history_db: Path) -> None:
    """A few chats in the list, one with a long code answer (once per KESTREL_HOME)."""
    from app.core.answer_stats import AnswerStats, FinishReason
    from app.core.conversation import Role
    from app.core.store.history import HistoryStore

    store = HistoryStore(history_db)
    try:
        if any(c.title == "Meter readings parser" for c in store.list_conversations()):
            return
        stats = AnswerStats(ttft_ms=91.0, tokens_per_s=47.5, tokens=412, device="CPU", finish_reason=FinishReason.STOP)
        for title, question in (("Trip ideas for a long weekend in the Alps with the kids and a dog", "Ideas?"),
                                ("Kestrel or falcon?", "What is the difference?")):
            chat = store.create_conversation(title)
            store.add_message(chat.id, Role.USER, question)
        chat = store.create_conversation("Meter readings parser")
        store.add_message(chat.id, Role.USER, "Split the parser out of this and add types, please.")
        store.add_message(chat.id, Role.ASSISTANT, LONG_CODE, stats=stats)
    finally:
        store.close()


async def window_view(window, view: str) -> QWidgetLike:
    """Bring the window to one view; returns what to grab (None: the whole screen)."""
    chat = window.doors.chat
    if view == "empty":
        chat.new_conversation()
    elif view == "code":
        await chat.open_conversation(_chat_id(window, "Meter readings parser"))
        await asyncio.sleep(0.3)
        window.messages.scrollToTop()  # the question, and the code block's language and Copy
    elif view == "code-wide":  # the long code answer scrolled to its longest line
        await chat.open_conversation(_chat_id(window, "Meter readings parser"))
        await asyncio.sleep(0.3)
        _scroll_to_text(window.messages, "raise ValueError")
    elif view == "streaming":
        chat.new_conversation()
        system_prompt, settings = chat.conversation_settings()
        await chat.set_conversation_settings(system_prompt, dataclasses.replace(
            settings, max_tokens=400, temperature=0.8))
        chat.send("Write a short story about a kestrel that learns to hover over a motorway.")
        await _until(lambda: len(window.adapter.messages.messages()) == 2
                     and len(window.adapter.messages.messages()[-1].text) > 250)
        return window
    elif view == "picker":
        window.header.model_button.click()
        await asyncio.sleep(0.5)
        return None
    elif view == "hardware":
        window.show_hardware()
        await _until(lambda: window.hardware_window is not None and window.hardware_window.isVisible())
        await asyncio.sleep(0.4)
        return window.hardware_window
    elif view == "about":
        window.show_about()
        await asyncio.sleep(0.4)
        return window.about
    elif view == "server-settings":
        from app.ui.settings.dialogs import SettingsDialog

        dialog = SettingsDialog(window.doors.settings.settings, window, adapter=window.adapter,
                                model=window.doors.model)
        dialog.tabs.setCurrentWidget(dialog.server)
        dialog.server.beyond.setChecked(True)  # its warning shows (nothing is saved: the dialog is not accepted)
        dialog.show()
        OPEN_DIALOGS.append(dialog)
        await asyncio.sleep(0.4)
        return dialog
    elif view == "server":
        await serve_a_few_requests(window)
        window.show_server_window()
        await asyncio.sleep(0.4)
        return window.server_window
    await asyncio.sleep(0.4)
    return window


def _scroll_to_text(messages, text: str) -> None:
    """Scroll the message list so that the first line holding text sits a third of the way down."""
    model = messages.model()
    for row in range(model.rowCount()):
        index = model.index(row, 0)
        messages.scrollTo(index)
        body = messages.delegate.body_of(index)
        for top, document in zip(body.tops, body.documents):
            found = document.find(text)
            if not found.isNull():
                y = top + document.documentLayout().blockBoundingRect(found.block()).top()
                place = messages.delegate.layout(index).text.top() + y
                bar = messages.verticalScrollBar()
                bar.setValue(int(bar.value() + place - messages.viewport().height() / 3))
                return


OPEN_DIALOGS: list = []  # dialogs a view opened without exec(): closed after the grab
SERVED: list = []  # the API server settings before the "server" view turned it on


async def stop_serving(window) -> None:
    """Put the server settings back as they were: later shots (and runs) show no API in the status line."""
    door = window.doors.settings
    while SERVED:
        await door.update_settings(dataclasses.replace(door.settings, server=SERVED.pop()))


async def serve_a_few_requests(window) -> None:
    """Turn the API server on (a free port on 127.0.0.1) and send it real requests from a thread."""
    import json
    import socket
    import urllib.error
    import urllib.request

    door = window.doors.settings
    if not window.server.on:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        SERVED.append(door.settings.server)
        server = dataclasses.replace(door.settings.server, enabled=True, port=port)
        await door.update_settings(dataclasses.replace(door.settings, server=server))
        await _until(lambda: window.server.on or window.server.failed)
    base, key = window.server.address, door.settings.server.key

    def send(path: str, body: dict | None, key: str) -> None:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(base + path, data=data, headers={
            "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=120).read()
        except urllib.error.HTTPError:
            pass  # a refused request is logged too: the table shows its status

    chat = {"messages": [{"role": "user", "content": "Name three birds of prey."}], "max_tokens": 24}
    for path, body, with_key in (("/v1/models", None, key), ("/v1/chat/completions", chat, key),
                                 ("/v1/chat/completions", chat, "kestrel-wrong-key")):
        await asyncio.to_thread(send, path, body, with_key)


def _chat_id(window, title: str) -> int:
    from app.ui.state.conversation_model import ConversationRoles

    model = window.adapter.conversations
    for row in range(model.rowCount()):
        if model.index(row).data() == title:
            return model.index(row).data(ConversationRoles.ID)
    raise SystemExit(f"no chat called {title!r}: run seed_chats first")


async def window_set(window, folder: Path, theme: str) -> None:
    """Every view of WINDOW_VIEWS, saved as folder/<view>-<theme>-<scale>.png."""
    import os

    from PySide6.QtGui import QGuiApplication

    await window.doors.start_up()
    await _until(lambda: window.doors.model.model_state.value == "ready")
    scale = os.environ.get("QT_SCALE_FACTOR", "1")
    folder.mkdir(parents=True, exist_ok=True)
    for view in WINDOW_VIEWS:
        shown = await window_view(window, view)
        image = shown.grab() if shown is not None else QGuiApplication.primaryScreen().grabWindow(0)
        image.save(str(folder / f"{view}-{theme}-{scale}x.png"))
        for closing in (window.hardware_window, getattr(window, "about", None), window.server_window, *OPEN_DIALOGS):
            if closing is not None:
                closing.close()
        if view == "picker":
            window.header.model_menu.close()
        if view == "streaming":
            window.doors.chat.stop()
            await window.doors.chat.wait_idle()
        await stop_serving(window)


async def manager_scenario(window, page: str, add: list[Path], paste: str | None = None) -> None:
    await window.doors.start_up()
    for path in add:
        await window.doors.library.add(str(path), reference=True)
    window.show_model_manager()
    manager = window.model_manager
    await _until(lambda: window.adapter.installed.rowCount() > 0 and window.adapter.catalog.rowCount() > 0)
    shown = {"catalog": manager.catalog, "downloads": manager.downloads}.get(page, manager.installed)
    manager.tabs.setCurrentWidget(shown)
    if shown is not manager.downloads:
        shown.view.select(0)
    if page == "settings":
        manager.installed.pane_tabs.setCurrentIndex(1)
    if paste:
        link = manager.catalog.link
        link.link.setText(paste)
        link.look_up()
        await _until(lambda: not link.note.text().startswith("Looking up"))
    await asyncio.sleep(0.5)


async def quick_ask_scene(window, service, shown: list) -> None:
    """The quick-ask window with a real answer in it, then summoned again with copied text offered."""
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtTest import QTest
    from PySide6.QtCore import Qt

    from app.service.doors.quick_ask import QuickAskDoor
    from app.ui.quick_ask.quick_window import QuickAskWindow

    await window.doors.start_up()
    await _until(lambda: window.doors.model.model_state.value == "ready")
    settings = window.doors.settings.settings
    await window.doors.settings.update_settings(dataclasses.replace(
        settings, generation=dataclasses.replace(settings.generation, max_tokens=160, temperature=0.0)))
    QGuiApplication.clipboard().setText("")
    quick = QuickAskWindow(QuickAskDoor(service))
    OPEN_DIALOGS.append(quick)
    quick.summon()
    QTest.keyClicks(quick.question, "List three facts about kestrels, in Markdown.")
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    await _until(lambda: quick.answers.last_answer() and not quick._door.busy)
    QGuiApplication.clipboard().setText("The common kestrel (Falco tinnunculus) is a bird of prey species belonging "
                                        "to the kestrel group of the falcon family Falconidae.")
    quick.summon()
    QTest.keyClicks(quick.question, "Where do they live?")
    await asyncio.sleep(0.5)
    shown.append(quick)


async def first_run_scenario(window) -> None:
    await window.doors.start_up()
    await _until(window.first_run.isVisible)
    await asyncio.sleep(0.3)


async def _until(predicate, timeout: float = 120) -> None:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise SystemExit("timed out waiting for the view to fill")


async def _one_view(window, view: str, shown: list) -> None:
    await window.doors.start_up()
    await _until(lambda: window.doors.model.model_state.value == "ready")
    shown.append(await window_view(window, view))


async def finish(window) -> None:
    await stop_serving(window)
    await window.shut_down()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--theme", choices=["light", "dark", "system"], default="light")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prompt", default="What is a kestrel?")
    parser.add_argument("--show", default="chat", choices=["chat", "installed", "settings", "catalog", "downloads", "first-run",
                                                           *WINDOW_VIEWS, "window-set", "tools-set", "quick-ask",
                                                           "quick-ask-approval"])
    parser.add_argument("--add", type=Path, action="append", default=[],
                        help="a model file to reference before showing the manager")
    parser.add_argument("--paste", help="with --show catalog: a repository or link to look up")
    parser.add_argument("--size", default="1180x780", help="the window's size, WIDTHxHEIGHT (800x600: the smallest)")
    parser.add_argument("--wrap-code", choices=["on", "off"],
                        help="View → Wrap long code lines, saved before the window starts (default: as saved)")
    args = parser.parse_args()

    import qasync
    from PySide6.QtWidgets import QApplication

    from app.core.paths import data_paths
    from app.core.settings import SettingsFile
    from app.ui.app import build_service, build_window

    app = QApplication(sys.argv)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    paths = data_paths().ensure()
    settings_file = SettingsFile(paths.settings_file)
    saved = dataclasses.replace(settings_file.load(), theme=args.theme)
    if args.wrap_code is not None:
        saved = dataclasses.replace(saved, wrap_code=args.wrap_code == "on")
    settings_file.save(saved)
    seed_chats(paths.history_db)
    if args.show == "tools-set":
        from scripts.tool_scenes import seed_tool_chat

        seed_tool_chat(paths.history_db)
    service = build_service(paths)
    window = build_window(service, paths)
    width, height = (int(number) for number in args.size.lower().split("x"))
    window.resize(width, height)
    window.show()
    in_manager = args.show in ("installed", "settings", "catalog", "downloads")
    shown: list = []
    if in_manager:
        work = manager_scenario(window, args.show, args.add, args.paste)
    elif args.show == "first-run":
        work = first_run_scenario(window)
    elif args.show == "window-set":
        work = window_set(window, args.out, args.theme)
    elif args.show == "tools-set":
        from scripts.tool_scenes import tool_set

        work = tool_set(window, service, args.out, args.theme)
    elif args.show in WINDOW_VIEWS:
        work = _one_view(window, args.show, shown)
    elif args.show == "quick-ask":
        work = quick_ask_scene(window, service, shown)
    elif args.show == "quick-ask-approval":
        from scripts.quick_ask_scenes import quick_ask_approval

        work = quick_ask_approval(window, service, shown, _until)
    else:
        work = scenario(window, service, args.prompt)
    task = loop.create_task(work)
    task.add_done_callback(lambda _: loop.stop())
    with loop:
        loop.run_forever()
        task.result()
        if args.show not in ("window-set", "tools-set"):
            target = window.model_manager if in_manager else (shown[0] if shown else window)
            image = target.grab() if target is not None else app.primaryScreen().grabWindow(0)
            image.save(str(args.out))
        done = loop.create_task(finish(window))
        done.add_done_callback(lambda _: loop.stop())
        loop.run_forever()
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
