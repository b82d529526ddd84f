"""What the library's download tests share: an opener that counts every byte written through it."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import pytest

from app.library.download.part import open_for_append


class Counting:
    """The default opener, counting every byte written through it."""

    written = 0

    def __init__(self, path: Path) -> None:
        self._file: BinaryIO = open_for_append(path)

    def write(self, block: bytes) -> int:
        Counting.written += len(block)
        return self._file.write(block)

    def __enter__(self) -> "Counting":
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()


@pytest.fixture
def counting() -> type[Counting]:
    Counting.written = 0
    return Counting
