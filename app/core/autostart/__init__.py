"""Start Kestrel when the person signs in: a Run value on Windows, an XDG autostart file on Linux,
a LaunchAgent on macOS. Plain Python that touches the disk or the registry: call it off the UI thread."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Protocol

from app.core.autostart.failure import AutostartError
from app.core.autostart.launch_agent import LaunchAgent, launch_agent_path
from app.core.autostart.windows_run_key import WindowsRunKey, windows_run_key
from app.core.autostart.xdg_autostart import XdgAutostartFile, xdg_autostart_path

__all__ = ["AutostartError", "LaunchAgent", "SignInEntry", "WindowsRunKey", "XdgAutostartFile", "disable", "renew",
           "enable", "enabled", "sign_in_command", "sign_in_entry"]

# Kestrel started at sign-in opens in the tray, not over what the person is starting.
BACKGROUND_FLAG = "--background"


class SignInEntry(Protocol):
    """The one place a platform keeps "run this when the user signs in"."""

    def enable(self, command: list[str]) -> None:
        """Write the entry so `command` runs at sign-in; AutostartError in plain words if refused."""

    def rewrite(self, command: list[str]) -> None:
        """Point the entry at `command`, changing nothing else of it (a "Disable" set elsewhere stays)."""

    def disable(self) -> None:
        """Remove the entry (nothing to do if there is none); AutostartError if refused."""

    def enabled(self) -> bool:
        """Whether the entry is there and will run."""


def sign_in_command() -> list[str]:
    """How to start this Kestrel, in the tray: the frozen program, or this Python with `-m app`."""
    if getattr(sys, "frozen", False):
        return [sys.executable, BACKGROUND_FLAG]
    return [sys.executable, "-m", "app", BACKGROUND_FLAG]


def sign_in_entry() -> SignInEntry:
    """This machine's entry: the Run key, a LaunchAgent, or an XDG autostart file (Linux and other Unix)."""
    if sys.platform == "win32":
        return windows_run_key()
    home = Path.home()
    if sys.platform == "darwin":
        return LaunchAgent(launch_agent_path(home))
    return XdgAutostartFile(xdg_autostart_path(os.environ, home))


def enable(command: list[str] | None = None) -> None:
    """Start Kestrel at sign-in with `command` (this Kestrel, in the tray, when not given)."""
    sign_in_entry().enable(sign_in_command() if command is None else command)


def renew(command: list[str] | None = None) -> None:
    """Point an entry that is still on at this Kestrel (an install that moved or was upgraded elsewhere). An
    entry the person removed or turned off outside Kestrel (Task Manager, the desktop's startup settings)
    stays as it is: Kestrel does not turn its sign-in back on behind their back."""
    entry = sign_in_entry()
    if entry.enabled():
        entry.rewrite(sign_in_command() if command is None else command)


def disable() -> None:
    """Stop starting Kestrel at sign-in."""
    sign_in_entry().disable()


def enabled() -> bool:
    """Whether Kestrel starts at sign-in on this machine now."""
    return sign_in_entry().enabled()
