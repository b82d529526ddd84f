"""Pausing, resuming, cancelling and stopping a download from another thread."""

from __future__ import annotations

import threading

from app.library.download.errors import DownloadStopped


class PauseRequested(Exception):
    """Raised between chunks so the download can close its connection before it waits."""


class DownloadControl:
    """What the user asked of one download; the download thread checks it between chunks.

    pause() makes the download flush its part, close the connection and wait; resume()
    goes on with a Range request. cancel() ends it and deletes its parts. stop() ends it
    and keeps them (the app is closing): a later download continues from there. All four
    may be called from any thread, as often as wanted. A control that was cancelled or
    stopped stays so: the next download gets a new one.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._paused = False
        self._ending: bool | None = None  # True: cancelled, False: stopped

    def pause(self) -> None:
        with self._changed:
            self._paused = True
            self._changed.notify_all()

    def resume(self) -> None:
        with self._changed:
            self._paused = False
            self._changed.notify_all()

    def cancel(self) -> None:
        self._end(cancelled=True)

    def stop(self) -> None:
        self._end(cancelled=False)

    @property
    def paused(self) -> bool:
        with self._changed:
            return self._paused

    def checkpoint(self) -> None:
        """Raise DownloadStopped once ended, PauseRequested while paused; return otherwise."""
        with self._changed:
            self._raise_if_ended()
            if self._paused:
                raise PauseRequested()

    def wait_while_paused(self) -> None:
        """Block the download thread until resume(), cancel() or stop()."""
        with self._changed:
            self._changed.wait_for(lambda: not self._paused or self._ending is not None)
            self._raise_if_ended()

    def sleep(self, seconds: float) -> None:
        """Wait before a retry, cut short by cancel() or stop()."""
        with self._changed:
            self._changed.wait_for(lambda: self._ending is not None, timeout=seconds)
            self._raise_if_ended()

    def _end(self, cancelled: bool) -> None:
        with self._changed:
            if self._ending is None:
                self._ending = cancelled
            self._changed.notify_all()

    def _raise_if_ended(self) -> None:
        if self._ending is True:
            raise DownloadStopped(True, "Download cancelled; what had arrived was deleted.")
        if self._ending is False:
            raise DownloadStopped(False, "Download stopped; what has arrived is kept, and "
                                         "starting it again continues from there.")
