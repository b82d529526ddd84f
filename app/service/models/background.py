"""What the engine does while the user looks elsewhere: the policy, in plain Python.

The window's state is reduced to three: FOREGROUND (Kestrel has the focus), BACKGROUND
(visible, another app has the focus) and HIDDEN (minimized, hidden, or the session
locked where the OS tells Qt). Kestrel has two windows that say so (the main window and the
quick-ask window, which may be shown while the main one waits in the tray): the engine
follows the most awake of them (WindowPresence). Two settings say what the last two do; the power state
can make "full speed" gentle. The result is a Pace, which the model session applies to the
engine: hold it between two tokens (PAUSED), or let it run at a lower OS priority and,
on Windows, in Efficiency mode (GENTLE), or at normal priority with Windows' power
throttling explicitly off (FULL), so that the OS does not slow it behind the user's back.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Protocol

from app.hardware.power import Power
from app.service.events import Pace


class WindowState(StrEnum):
    FOREGROUND = "foreground"
    BACKGROUND = "background"
    HIDDEN = "hidden"


class AppWindow(StrEnum):
    """Which of Kestrel's windows tells its state. VOICE is voice mode's turn (app/service/voice/voice_mode.py):
    in front while the person is heard or answered aloud, so a hidden window does not hold the answer they
    wait to hear; hidden otherwise."""

    MAIN = "main"
    QUICK_ASK = "quick_ask"
    VOICE = "voice"


_AWAKE = (WindowState.HIDDEN, WindowState.BACKGROUND, WindowState.FOREGROUND)  # least awake first


class WindowPresence:
    """Each window's last state, and Kestrel's: the most awake of them.

    The main window starts in front (a front end that never says otherwise runs at full
    speed); the quick-ask window starts hidden until it is summoned.
    """

    def __init__(self) -> None:
        self._states = {AppWindow.MAIN: WindowState.FOREGROUND, AppWindow.QUICK_ASK: WindowState.HIDDEN,
                        AppWindow.VOICE: WindowState.HIDDEN}

    def report(self, window: AppWindow, state: WindowState) -> WindowState:
        """This window is now in this state; what Kestrel as a whole is."""
        self._states[window] = state
        return self.state

    @property
    def state(self) -> WindowState:
        return max(self._states.values(), key=_AWAKE.index)

    def of(self, window: AppWindow) -> WindowState:
        """This window's own last state."""
        return self._states[window]


def pace_for(window: WindowState, power: Power, *, when_hidden: str, when_in_background: str,
             serving: bool = False) -> Pace:
    """How the engine should run now. serving: an API answer runs, for another program that
    waits for it, so a hidden or background window slows the engine but never holds it."""
    if window == WindowState.FOREGROUND:
        return Pace.FULL
    chosen = Pace(when_hidden if window == WindowState.HIDDEN else when_in_background)
    if chosen == Pace.PAUSED and serving:
        return Pace.GENTLE
    if chosen == Pace.FULL and power.on_battery and power.saver:
        return Pace.GENTLE  # Battery saver asks apps not to run flat out behind the user's back.
    return chosen


def pace_words(pace: Pace, window: WindowState) -> str | None:
    """What the status bar says about the pace, or None when there is nothing to say."""
    if pace == Pace.PAUSED:
        return "Paused — window hidden" if window == WindowState.HIDDEN else "Paused — Kestrel is in the background"
    if pace == Pace.GENTLE:
        return "Running gently in the background"
    return None


class EnginePace:
    """Applies the policy to one engine client: pause or resume it, set its priority.

    `update()` is told the window's state and the settings; `loaded()` after a model
    load, since a new engine process starts at normal priority. `problem` keeps the
    last priority problem (shown in the hardware window, never a dialog).
    """

    def __init__(self, client: "PacedClient", read_power: Callable[[], Power],
                 set_gentle: Callable[[int, bool], str | None]) -> None:
        self._client = client
        self._read_power = read_power
        self._set_gentle = set_gentle
        self.window = WindowState.FOREGROUND
        self.pace = Pace.FULL
        self.serving = False
        self._choices = ("pause", "full")  # when_hidden, when_in_background, as last told
        self._gentle_pid: int | None = None  # the engine process last set gentle
        self.problem: str | None = None

    def update(self, window: WindowState, *, when_hidden: str, when_in_background: str) -> bool:
        """The window's state or the settings changed; True if the pace did."""
        self.window, self._choices = window, (when_hidden, when_in_background)
        pace = pace_for(window, self._read_power() if window != WindowState.FOREGROUND else Power(),
                        when_hidden=when_hidden, when_in_background=when_in_background, serving=self.serving)
        if pace == self.pace:
            return False
        was_paused, self.pace = self.pace == Pace.PAUSED, pace
        if pace == Pace.PAUSED:
            self._client.pause()
        elif was_paused:
            self._client.resume()
        self._apply_priority()
        return True

    def serve(self, serving: bool) -> bool:
        """An API answer began (True) or the last one ended; True if the pace changed."""
        self.serving = serving
        return self.update(self.window, when_hidden=self._choices[0], when_in_background=self._choices[1])

    def loaded(self) -> None:
        """A model was loaded, perhaps in a new engine process: give it the current pace."""
        self._gentle_pid = None
        if self.pace == Pace.PAUSED:
            self._client.pause()  # a new engine starts running
        self._apply_priority(always=True)

    def words(self) -> str | None:
        return pace_words(self.pace, self.window)

    def _apply_priority(self, always: bool = False) -> None:
        pid = self._client.pid
        if pid is None:
            return
        gentle = self.pace == Pace.GENTLE
        if not always and (self._gentle_pid == pid) == gentle:
            return
        self.problem = self._set_gentle(pid, gentle)
        self._gentle_pid = pid if gentle else None


class PacedClient(Protocol):
    """What EnginePace needs of the engine client."""

    @property
    def pid(self) -> int | None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...
