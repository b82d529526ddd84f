"""A limited child that dies while it starts is reported as not started (RuntimeError), never as a bare EOFError."""

from __future__ import annotations

import os
from multiprocessing.connection import Connection

import pytest

from app.documents.limited_child import LimitedChild


def die_at_start(conn: Connection) -> None:
    """A child that ends before its "ready" (an import that fails, a library that aborts)."""
    os._exit(3)


def test_a_child_that_dies_while_starting_did_not_start() -> None:
    child: LimitedChild[object] = LimitedChild(die_at_start, (), name="kestrel-test-child", role="test check",
                                               start_s=30)
    try:
        with pytest.raises(RuntimeError, match="the test check process did not start"):
            child.ask("an item", 5)
    finally:
        child.close()
