"""Fixtures for the core tests: a history store on a real SQLite file and a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.store.history import HistoryStore


class FakeClock:
    """A clock the test moves by hand; every reading is what the test set."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "history.sqlite3"


@pytest.fixture
def store(db_path: Path, clock: FakeClock) -> Iterator[HistoryStore]:
    with HistoryStore(db_path, clock=clock) as opened:
        yield opened
