"""Sample-rate conversion of a stream block by block (a device that will not record at 16 kHz), without seams."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


class StreamResampler:
    """Linear interpolation that carries its position and last sample from block to block, so the joins
    click no more than the inside of a block (enough for speech, whose features stop at 8 kHz)."""

    def __init__(self, source_rate: int, target_rate: int) -> None:
        self._step = source_rate / target_rate  # source samples per output sample
        self._position = 0.0  # the next output's place, in source samples counted from self._previous
        self._previous: npt.NDArray[np.float64] = np.zeros(0)

    def convert(self, block: npt.NDArray[np.int16]) -> npt.NDArray[np.int16]:
        samples = np.concatenate([self._previous, block.astype(np.float64)])
        if samples.size < 2:
            self._previous = samples
            return np.zeros(0, dtype=np.int16)
        last = samples.size - 1
        count = int(np.floor((last - self._position) / self._step)) + 1 if self._position <= last else 0
        places = self._position + np.arange(count) * self._step
        out = np.interp(places, np.arange(samples.size), samples)
        next_position = self._position + count * self._step
        keep_from = min(int(np.floor(next_position)), last)
        self._previous = samples[keep_from:]
        self._position = next_position - keep_from
        return np.clip(np.round(out), -32768, 32767).astype(np.int16)
