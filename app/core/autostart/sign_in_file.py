"""A sign-in entry that is one file of the person's (Linux's autostart file, macOS's launch agent)."""

from __future__ import annotations

from pathlib import Path

from app.core.autostart.failure import AutostartError, reason
from app.core.files import write_atomically


class SignInFile:
    """Written whole (a crash leaves the old file or the new one), removed, and read back; each
    failure in words naming the file. Subclasses give the file's `contents` for a command, what it
    says `enabled`, and where else the person can add (`add_instead`) or remove (`remove_instead`)
    the entry when Kestrel cannot."""

    add_instead = ""
    remove_instead = "Delete that file yourself."

    def __init__(self, path: Path) -> None:
        self.path = path

    def contents(self, command: list[str]) -> bytes:
        raise NotImplementedError

    def enable(self, command: list[str]) -> None:
        try:
            write_atomically(self.path, self.contents(command))
        except OSError as error:
            raise AutostartError(
                f"Kestrel could not write {self.path} ({reason(error)}), so it will not start when you sign "
                f"in. Check that you can write to the folder {self.path.parent}, {self.add_instead}") from error

    def rewrite(self, command: list[str]) -> None:
        """The file names `command` (called only while it is on, so writing it whole keeps it on)."""
        self.enable(command)

    def disable(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError as error:
            raise AutostartError(
                f"Kestrel could not remove {self.path} ({reason(error)}), so it will still start when you "
                f"sign in. {self.remove_instead}") from error

    def read(self) -> bytes | None:
        """The file's bytes; None when there is none."""
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise AutostartError(f"Kestrel could not read {self.path} ({reason(error)}). "
                                 "Check the file's permissions.") from error
