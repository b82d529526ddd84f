"""A reader or an image checker left open when Kestrel's process ends: its child is ended by
the supervisor's exit hook (app/core/children/registry.py), not waited for.

The children here ignore SIGTERM, as one stuck in native code may: multiprocessing's own exit
handler only sends SIGTERM and then waits, so without the hook the process would never end."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from app.documents.image_check import ImageInput, ImageResult, check_image
from app.documents.reading import read_document
from app.documents.values import DocumentText, ReadLimits, Unreadable

ROOT = Path(__file__).resolve().parents[2]


def deaf_check(item: ImageInput) -> ImageResult:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return check_image(item)


def deaf_read(path: Path, *, limits: ReadLimits) -> DocumentText | Unreadable:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return read_document(path, limits=limits)


LEFT_OPEN = {
    "reader": """
        from app.documents.reader_worker import ReaderPool
        from tests.documents.test_children_at_exit import deaf_read
        opened = ReaderPool(read=deaf_read)
        note = folder / "note.txt"
        note.write_text("hello")
        print(type(opened.read(note)).__name__)
    """,
    "image check": """
        from app.documents.image_worker import ImageChecker
        from tests.documents.test_children_at_exit import deaf_check
        from tests.helpers.images import write_image
        opened = ImageChecker(check=deaf_check)
        print(type(opened.check(write_image(folder / "a.png", 10, 10))).__name__)
    """,
}


@pytest.mark.parametrize("kind", sorted(LEFT_OPEN))
def test_a_child_left_open_is_ended_when_the_process_exits(kind: str, tmp_path: Path) -> None:
    script = "from pathlib import Path\nimport sys\nfolder = Path(sys.argv[1])\n" + textwrap.dedent(LEFT_OPEN[kind])
    # the child's process id, and exit without closing it
    script += "import multiprocessing\nprint(*[c.pid for c in multiprocessing.active_children()], flush=True)\n"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    answered, pid = done.stdout.split()
    assert answered in ("DocumentText", "AttachedImage")
    assert time.monotonic() - started < 60
    try:
        gone = psutil.Process(int(pid)).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        gone = True
    assert gone, f"the {kind} child {pid} outlived its parent"
