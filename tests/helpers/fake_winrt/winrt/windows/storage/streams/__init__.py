"""PyWinRT's winrt.windows.storage.streams: DataReader over an input stream."""

from __future__ import annotations

import io


class _Operation:
    def __init__(self, result: int) -> None:
        self._result = result

    def get(self) -> int:
        return self._result


class DataReader:
    def __init__(self, input_stream: io.BytesIO) -> None:
        self._stream = input_stream
        self._loaded = b""

    def load_async(self, count: int) -> _Operation:
        if count >= 1 << 32:
            raise OverflowError("load_async takes a 32-bit count")
        got = self._stream.read(count)
        self._loaded += got
        return _Operation(len(got))

    def read_buffer(self, length: int) -> bytes:
        taken, self._loaded = self._loaded[:length], self._loaded[length:]
        return taken
