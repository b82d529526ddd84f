"""macOS: ~/Library/LaunchAgents/<label>.plist, which launchd loads (and runs, with RunAtLoad) at sign-in."""

from __future__ import annotations

import plistlib
from pathlib import Path
from xml.parsers.expat import ExpatError

from app.core.autostart.sign_in_file import SignInFile

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


class LaunchAgent(SignInFile):
    """The agent's plist at `path` (see launch_agent_path)."""

    add_instead = "or add Kestrel in System Settings → General → Login Items."

    def contents(self, command: list[str]) -> bytes:
        return agent_plist(command)

    def enabled(self) -> bool:
        """Whether the agent is there and runs at load (a damaged file runs nothing)."""
        data = self.read()
        if data is None:
            return False
        try:
            agent = plistlib.loads(data)
        except (ValueError, ExpatError):  # plistlib's InvalidFileException is a ValueError
            return False
        return isinstance(agent, dict) and agent.get("RunAtLoad") is True and bool(agent.get("ProgramArguments"))
