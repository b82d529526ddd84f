"""Every official client a test made is closed after it (an open one is a ResourceWarning)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.helpers import OPEN_CLIENTS


@pytest.fixture(autouse=True)
def close_clients() -> Iterator[None]:
    yield
    while OPEN_CLIENTS:
        OPEN_CLIENTS.pop().close()
