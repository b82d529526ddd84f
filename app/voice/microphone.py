"""A microphone session: opened only by start(), 16 kHz mono int16 blocks on a queue, a live level, and an end in words.

PortAudio calls back on its own audio thread; the callback only copies the block, measures its level and
queues it, so a slow reader never makes the device drop sound. A reader takes blocks with read(), from
any one thread. The session ends on stop(), or by itself when the device goes: PortAudio ends the stream
(its finished callback comes without a stop), or no block arrives for a while (a device that vanished
without PortAudio noticing). Either way read() hands over every block that was recorded, then the end
with its problem; nothing waits for ever on a device that is gone.
"""

from __future__ import annotations

import math
import queue
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from app.voice.audio import SAMPLE_RATE
from app.voice.devices import (DeviceProblem, DeviceUnavailable, pick_device, problem_of, sound_library, stream_closed,
                               stream_opened)
from app.voice.resampling import StreamResampler

Block = npt.NDArray[np.int16]
# 32 ms: the voice activity detector's window, and a meter that moves at about 30 frames a second.
BLOCK_SAMPLES = 512
# The quietest level a 16-bit sample can express; silence reads as this, not as minus infinity.
FLOOR_DBFS = -96.0
_INVALID_SAMPLE_RATE = -9997


@dataclass(frozen=True)
class Level:
    """The last block's loudness in dB below full scale: rms for a meter's bar, peak for its clip light."""

    rms_dbfs: float = FLOOR_DBFS
    peak_dbfs: float = FLOOR_DBFS


@dataclass(frozen=True)
class MicrophoneEnded:
    """The session is over and every recorded block has been read. problem: None when stop() ended it."""

    problem: DeviceProblem | None = None
    detail: str = ""


@dataclass(frozen=True)
class MicrophoneTimings:
    """first_block_s: how long a started device may take to send its first block (PulseAudio's first one
    came after 1-2 s here); stall_s: the longest gap between blocks before the device counts as gone
    (blocks come every 32 ms, and a quiet microphone still sends them); close_s: how long closing may take
    before the stream is left to PortAudio's thread."""

    first_block_s: float = 5.0
    stall_s: float = 1.5
    close_s: float = 2.0


def level_of(block: Block) -> Level:
    if block.size == 0:
        return Level()
    samples = block.astype(np.float64) / 32768.0
    rms = math.sqrt(float(np.mean(samples * samples)))
    peak = float(np.max(np.abs(samples)))
    return Level(_dbfs(rms), _dbfs(peak))


def _dbfs(value: float) -> float:
    return max(FLOOR_DBFS, 20.0 * math.log10(value)) if value > 0 else FLOOR_DBFS


class MicrophoneSession:
    """One recording from one input device (device: its name, None for the default). Nothing opens until start()."""

    def __init__(self, device: str | None = None, *, capture_rate: int | None = None,
                 timings: MicrophoneTimings = MicrophoneTimings(), platform: str = sys.platform) -> None:
        self._device_name = device
        self._capture_rate = capture_rate  # None: 16 kHz where the device takes it, else its own rate
        self._timings = timings
        self._platform = platform
        self._blocks: queue.SimpleQueue[Block] = queue.SimpleQueue()
        self._stream: Any = None
        self._resampler: StreamResampler | None = None
        self._level = Level()
        self._started_at = 0.0
        self._last_block_at: float | None = None
        self._capture_latency = 0.0
        self._mark: tuple[int, float] | None = None  # (16 kHz samples so far, when the last of them was heard)
        self._delivered = 0
        self._stopping = threading.Event()
        self._closing = threading.Lock()  # stop() may come from the UI thread while the reader ends it too
        self._lost: str | None = None  # PortAudio's words when the stream ended without a stop
        self._ended: MicrophoneEnded | None = None
        self.device_used = ""

    @property
    def level(self) -> Level:
        """The last block's level (read from any thread: one reference, swapped whole)."""
        return self._level

    @property
    def open(self) -> bool:
        return self._stream is not None

    def start(self) -> None:
        """Open the microphone and start recording; DeviceUnavailable (with its problem) when it cannot."""
        if self._stream is not None or self._ended is not None:
            raise RuntimeError("a session records once")
        sd = sound_library()
        device = pick_device(self._device_name, microphone=True)
        stream_opened()
        try:
            stream, rate = self._opened(sd, device.index, device.default_rate)
        except BaseException:
            stream_closed()
            raise
        self._resampler = StreamResampler(rate, SAMPLE_RATE) if rate != SAMPLE_RATE else None
        self.device_used = device.name
        self._capture_latency = float(getattr(stream, "latency", 0.0) or 0.0)
        self._started_at = time.monotonic()
        self._stream = stream
        try:
            stream.start()
        except sd.PortAudioError as exc:
            self._close_stream()
            raise problem_of(str(exc), microphone=True, platform=self._platform) from exc

    def heard_at(self, sample: int) -> float | None:
        """The monotonic time the 16 kHz sample numbered sample was heard (None before the first block),
        counted back from the newest block's: a dropped block or a slow first one never shifts it for long."""
        mark = self._mark
        if mark is None:
            return None
        delivered, at = mark
        return at - (delivered - sample) / SAMPLE_RATE

    def read(self, timeout: float) -> Block | MicrophoneEnded | None:
        """The next 16 kHz block; MicrophoneEnded once the session is over and drained; None if nothing came in time."""
        if self._ended is not None:
            return self._ended
        try:
            return self._blocks.get(timeout=timeout)
        except queue.Empty:
            pass
        end = self._end_now()
        if end is None:
            return None
        try:
            return self._blocks.get_nowait()  # a block that came while the end was decided
        except queue.Empty:
            self._ended = end
            self._close_stream()
            return end

    def stop(self) -> None:
        """End the recording now (from any thread); blocks already recorded are still read."""
        self._stopping.set()
        self._close_stream()

    def _opened(self, sd: Any, index: int, device_rate: float) -> tuple[Any, int]:
        rates = [self._capture_rate] if self._capture_rate else [SAMPLE_RATE, int(device_rate)]
        for rate in rates:
            try:
                stream = sd.InputStream(samplerate=rate, channels=1, dtype="int16", device=index,
                                        blocksize=round(BLOCK_SAMPLES * rate / SAMPLE_RATE), callback=self._on_block,
                                        finished_callback=self._on_finished)
                return stream, rate
            except sd.PortAudioError as exc:
                code = exc.args[1] if len(exc.args) > 1 else 0
                if code != _INVALID_SAMPLE_RATE or rate == rates[-1]:
                    raise problem_of(str(exc), microphone=True, platform=self._platform) from exc
        raise DeviceUnavailable(DeviceProblem.OPEN_FAILED, "no sample rate")

    def _on_block(self, indata: npt.NDArray[np.int16], frames: int, when: Any, status: Any) -> None:
        """PortAudio's callback, on its audio thread: copy, measure, queue; nothing that can block."""
        block = indata[:, 0].copy()
        if self._resampler is not None:
            block = self._resampler.convert(block)
        self._last_block_at = time.monotonic()
        self._delivered += block.size
        self._mark = (self._delivered, self._last_block_at - self._capture_latency)
        self._level = level_of(block)
        self._blocks.put(block)

    def _on_finished(self) -> None:
        if not self._stopping.is_set():
            self._lost = "the stream ended"

    def _end_now(self) -> MicrophoneEnded | None:
        if self._stopping.is_set():
            return MicrophoneEnded()
        if self._lost is not None:
            return MicrophoneEnded(DeviceProblem.DEVICE_LOST, self._lost)
        now = time.monotonic()
        if self._last_block_at is None and now - self._started_at > self._timings.first_block_s:
            return MicrophoneEnded(DeviceProblem.DEVICE_LOST, f"no sound in {self._timings.first_block_s:.0f} s")
        if self._last_block_at is not None and now - self._last_block_at > self._timings.stall_s:
            return MicrophoneEnded(DeviceProblem.DEVICE_LOST, f"no sound for {self._timings.stall_s:.1f} s")
        return None

    def _close_stream(self) -> None:
        """Abort and close in a thread of its own, waited for a bounded time: a driver that hangs on a
        vanished device keeps that thread, never the caller."""
        with self._closing:
            stream, self._stream = self._stream, None
        if stream is None:
            return

        def close() -> None:
            try:
                stream.abort()
                stream.close()
            except Exception:  # PortAudio's errors closing a stream whose device is gone: it is closed for us
                pass
            finally:
                stream_closed()

        closer = threading.Thread(target=close, name="kestrel-mic-close", daemon=True)
        closer.start()
        closer.join(self._timings.close_s)
