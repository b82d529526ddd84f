"""Take a screenshot of the real window with a conversation in it (for review, not tests).

    KESTREL_HOME=/tmp/shot python scripts/screenshot.py --theme dark --out dark.png

Starts the app's window on the default model (the starter, set up if needed), adds a
Markdown-rich exchange to the history, sends one real message, waits for the answer,
and saves the window. Run it under Xvfb to see what a user sees (QT_QPA_PLATFORM=xcb),
with QT_SCALE_FACTOR=2 for 200% scaling.
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--theme", choices=["light", "dark", "system"], default="light")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prompt", default="What is a kestrel?")
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
    task = loop.create_task(scenario(window, args.prompt))
    task.add_done_callback(lambda _: loop.stop())
    with loop:
        loop.run_forever()
        task.result()
        window.grab().save(str(args.out))
        done = loop.create_task(window.controller.shutdown())
        done.add_done_callback(lambda _: loop.stop())
        loop.run_forever()
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
