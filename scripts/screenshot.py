"""Take a screenshot of the real window with a conversation in it (for review, not tests).

    KESTREL_HOME=/tmp/shot python scripts/screenshot.py --theme dark --out dark.png

Starts the app's window on the default model (the starter, set up if needed), adds a
Markdown-rich exchange to the history, sends one real message, waits for the answer,
and saves the window. Run it under Xvfb to see what a user sees (QT_QPA_PLATFORM=xcb),
with QT_SCALE_FACTOR=2 for 200% scaling.

--show picks another view: "installed", "settings" and "catalog" (the model manager, with
--add MODEL referencing a model file first, so the table has more than the starter),
or "first-run" (the empty chat's offer, as a new user on the starter sees it). With
--paste TEXT, "catalog" also looks TEXT up (a Hugging Face repository or a link; set
HF_ENDPOINT to a local server to stay offline) and shows what it found.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from pathlib import Path

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


async def scenario(window, prompt: str) -> None:
    from app.core.answer_stats import AnswerStats
    from app.core.conversation import Role
    from app.core.history import HistoryStore

    controller = window.controller
    await controller.start_up()
    controller.new_conversation()
    system_prompt, settings = controller.conversation_settings()
    await controller.set_conversation_settings(system_prompt, dataclasses.replace(settings, max_tokens=40,
                                                                                   temperature=0.0))
    conversation_id = controller.conversation.id
    await controller.rename_conversation(conversation_id, "Summing numbers in a file")
    stats = AnswerStats(ttft_ms=84.0, tokens_per_s=48.2, tokens=96, device="CPU", finish_reason="stop")

    def sample(store: HistoryStore) -> None:
        store.add_message(conversation_id, Role.USER, "How do I add up the numbers in a file, one per line?")
        store.add_message(conversation_id, Role.ASSISTANT, SAMPLE_ANSWER, stats=stats.to_dict())

    await controller.storage.history(sample)
    await controller.open_conversation(conversation_id)
    controller.send(prompt)
    await controller.wait_idle()
    await asyncio.sleep(0.3)


async def manager_scenario(window, page: str, add: list[Path], paste: str | None = None) -> None:
    controller = window.controller
    await controller.start_up()
    for path in add:
        await controller.library.add(str(path), reference=True)
    window.show_model_manager()
    manager = window.model_manager
    await _until(lambda: window.adapter.installed.rowCount() > 0 and window.adapter.catalog.rowCount() > 0)
    shown = manager.catalog if page == "catalog" else manager.installed
    manager.tabs.setCurrentWidget(shown)
    shown.view.selectRow(0)
    if page == "settings":
        manager.installed.pane_tabs.setCurrentIndex(1)
    if paste:
        link = manager.catalog.link
        link.link.setText(paste)
        link.look_up()
        await _until(lambda: not link.note.text().startswith("Looking up"))
    await asyncio.sleep(0.5)


async def first_run_scenario(window) -> None:
    await window.controller.start_up()
    await _until(window.first_run.isVisible)
    await asyncio.sleep(0.3)


async def _until(predicate, timeout: float = 120) -> None:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise SystemExit("timed out waiting for the view to fill")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--theme", choices=["light", "dark", "system"], default="light")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prompt", default="What is a kestrel?")
    parser.add_argument("--show", choices=["chat", "installed", "settings", "catalog", "first-run"], default="chat")
    parser.add_argument("--add", type=Path, action="append", default=[],
                        help="a model file to reference before showing the manager")
    parser.add_argument("--paste", help="with --show catalog: a repository or link to look up")
    args = parser.parse_args()

    import qasync
    from PySide6.QtWidgets import QApplication

    from app.core.paths import data_paths
    from app.core.settings import SettingsFile
    from app.ui.app import build_window

    app = QApplication(sys.argv)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    paths = data_paths().ensure()
    settings_file = SettingsFile(paths.settings_file)
    settings_file.save(dataclasses.replace(settings_file.load(), theme=args.theme))
    window = build_window(paths)
    window.resize(1100, 760)
    window.show()
    in_manager = args.show in ("installed", "settings", "catalog")
    if in_manager:
        work = manager_scenario(window, args.show, args.add, args.paste)
    elif args.show == "first-run":
        work = first_run_scenario(window)
    else:
        work = scenario(window, args.prompt)
    task = loop.create_task(work)
    task.add_done_callback(lambda _: loop.stop())
    with loop:
        loop.run_forever()
        task.result()
        shown = window.model_manager if in_manager else window
        shown.grab().save(str(args.out))
        done = loop.create_task(window.controller.shutdown())
        done.add_done_callback(lambda _: loop.stop())
        loop.run_forever()
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
