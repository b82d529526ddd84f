"""PyWinRT's winrt.windows.storage.streams: DataReader over an input stream."""

from __future__ import annotations

import io

from winrt._fake import Operation


class DataReader:
    def __init__(self, input_stream: io.BytesIO) -> None:
        self._stream = input_stream
        self._loaded = b""

    def load_async(self, count: int) -> Operation:
        if count >= 1 << 32:
            raise OverflowError("load_async takes a 32-bit count")
        got = self._stream.read(count)
        self._loaded += got
        return Operation(len(got))

    def read_buffer(self, length: int) -> bytes:
        taken, self._loaded = self._loaded[:length], self._loaded[length:]
        return taken
