"""Linux and other XDG desktops: $XDG_CONFIG_HOME/autostart/kestrel.desktop, the file every desktop that
follows the XDG Autostart spec runs at sign-in."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from app.core.autostart.sign_in_file import SignInFile

FILE_NAME = "kestrel.desktop"
# The Desktop Entry spec's reserved characters: an argument holding one is quoted whole.
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")
# Inside double quotes these four take a backslash.
_ESCAPED_IN_QUOTES = set("\"`$\\")


def xdg_autostart_path(environ: Mapping[str, str], home: Path) -> Path:
    """Where the autostart file goes: $XDG_CONFIG_HOME/autostart, ~/.config when unset or not absolute."""
    config = environ.get("XDG_CONFIG_HOME", "")
    base = Path(config) if config and os.path.isabs(config) else home / ".config"
    return base / "autostart" / FILE_NAME


def exec_argument(argument: str) -> str:
    """One argument as the Desktop Entry spec's Exec key reads it (before the string escapes)."""
    # "%" starts a field code (%f, %u) anywhere in Exec, quoted or not: a literal one is "%%".
    text = argument.replace("%", "%%")
    if argument and not any(c in _RESERVED for c in argument):
        return text
    return '"' + "".join("\\" + c if c in _ESCAPED_IN_QUOTES else c for c in text) + '"'


def exec_line(command: list[str]) -> str:
    """The Exec value for command: each argument quoted, then the string escapes of every key's value."""
    if any("\n" in a or "\r" in a for a in command):
        raise ValueError(f"An autostart command cannot hold a line break: {command!r}")
    quoted = " ".join(exec_argument(a) for a in command)
    # The spec undoes a string value's escapes (\\ \s \n \t \r) before the Exec quoting, so
    # each backslash the quoting wrote is written twice: a literal "\" in a path takes four.
    return quoted.replace("\\", "\\\\").replace("\t", "\\t")


def desktop_entry(command: list[str]) -> str:
    """The whole autostart file for command."""
    return "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Name=Kestrel",
        "Comment=Offline AI assistant, waiting in the tray for quick ask",
        f"Exec={exec_line(command)}",
        "Terminal=false",
        "X-GNOME-Autostart-enabled=true",
        "",
    ])


class XdgAutostartFile(SignInFile):
    """The autostart file at `path` (see xdg_autostart_path)."""

    add_instead = 'then turn "Start Kestrel when I sign in" on again.'
    remove_instead = "Delete that file yourself, or turn it off in your desktop's startup applications."

    def contents(self, command: list[str]) -> bytes:
        return desktop_entry(command).encode("utf-8")

    def enabled(self) -> bool:
        """Whether the file is there and not turned off (Hidden=true, or GNOME's own switch)."""
        data = self.read()
        if data is None:
            return False
        lines = {line.strip().replace(" ", "") for line in data.decode("utf-8", errors="replace").splitlines()}
        return not ({"Hidden=true", "X-GNOME-Autostart-enabled=false"} & lines)
