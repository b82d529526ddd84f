"""macOS: ~/Library/LaunchAgents/<label>.plist, which launchd loads (and runs, with RunAtLoad) at sign-in."""

from __future__ import annotations

import plistlib
from pathlib import Path
from xml.parsers.expat import ExpatError

from app.core.autostart.failure import AutostartError, reason
from app.core.files import write_atomically

# launchd's name for the job; the same reverse-DNS name a bundle identifier would take.
LABEL = "org.kestrel.Kestrel"


def launch_agent_path(home: Path) -> Path:
    """The agent's file in this user's LaunchAgents folder."""
    return home / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def agent_plist(command: list[str]) -> bytes:
    """The agent: run command once at sign-in, in the person's graphical session only."""
    return plistlib.dumps({
        "Label": LABEL,
        # launchd runs the arguments as given, with no shell: no quoting to get wrong.
        "ProgramArguments": list(command),
        "RunAtLoad": True,
        "LimitLoadToSessionType": "Aqua",
        "ProcessType": "Interactive",
    })


class LaunchAgent:
    """The agent's plist at `path` (see launch_agent_path)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def enable(self, command: list[str]) -> None:
        try:
            write_atomically(self.path, agent_plist(command))
        except OSError as error:
            raise AutostartError(
                f"Kestrel could not write {self.path} ({reason(error)}), so it will not start when you sign "
                f"in. Check that you can write to the folder {self.path.parent}, or add Kestrel in System "
                "Settings → General → Login Items.") from error

    def disable(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError as error:
            raise AutostartError(
                f"Kestrel could not remove {self.path} ({reason(error)}), so it will still start when you "
                "sign in. Delete that file yourself.") from error

    def enabled(self) -> bool:
        """Whether the agent is there and runs at load (a damaged file runs nothing)."""
        try:
            data = plistlib.loads(self.path.read_bytes())
        except FileNotFoundError:
            return False
        except OSError as error:
            raise AutostartError(f"Kestrel could not read {self.path} ({reason(error)}). "
                                 "Check the file's permissions.") from error
        except (ValueError, ExpatError):  # plistlib's InvalidFileException is a ValueError
            return False
        return isinstance(data, dict) and data.get("RunAtLoad") is True and bool(data.get("ProgramArguments"))
