"""What can stop a download, in words the user can act on, with a kind for callers."""

from __future__ import annotations

from enum import StrEnum
from urllib.parse import urlsplit


class DownloadErrorKind(StrEnum):
    """Why a download failed; callers choose what to offer (retry, free space, another URL)."""

    BAD_URL = "bad_url"            # not http or https
    NOT_FOUND = "not_found"        # 404, 410
    NEEDS_LOGIN = "needs_login"    # 401
    REFUSED = "refused"            # 403 and the other 4xx, endless redirects
    SERVER = "server"              # 5xx on every try
    NETWORK = "network"            # unreachable, reset, timed out on every try
    NO_SPACE = "no_space"          # refused before starting: not enough free space
    DISK_FULL = "disk_full"        # the disk filled up while writing; the part is kept
    DISK_ERROR = "disk_error"      # another write error; the part is kept
    DAMAGED = "damaged"            # wrong size or SHA-256; the file was deleted
    CHANGED = "changed"            # the server's SHA-256 is not the one the catalog expects


# How the window adds a file the user downloaded in a browser; a front end with another
# way gives its own to DownloadError.words.
IMPORT_STEP = 'use "Import a model file…"'


class DownloadError(Exception):
    """A download failed for a reason the user can do something about; str() says what.

    then_import: the message ends in advice to download the file in a browser, and then to
    add it, which each front end words its own way (words); message has the window's way."""

    def __init__(self, kind: DownloadErrorKind, message: str, *, then_import: bool = False) -> None:
        self.kind = kind
        self._before = message
        self._then_import = then_import
        self.message = self.words(IMPORT_STEP)
        super().__init__(self.message)

    def words(self, import_step: str) -> str:
        """The message with import_step as the way to add a file downloaded by hand."""
        return f"{self._before} then {import_step}." if self._then_import else self._before


class DownloadStopped(Exception):
    """The user ended the download: cancelled (parts deleted) or stopped (parts kept)."""

    def __init__(self, cancelled: bool, message: str) -> None:
        super().__init__(message)
        self.cancelled = cancelled
        self.message = message


def host_of(url: str) -> str:
    return urlsplit(url).netloc or url


def bad_scheme(url: str) -> DownloadError:
    return DownloadError(DownloadErrorKind.BAD_URL,
                         f"Kestrel downloads only from http:// or https:// addresses, and "
                         f"\"{url}\" is not one. Check the address and try again.")


def refusal(url: str, status: int, reason: str) -> DownloadError:
    """The final answer for a 4xx: no retry can change it."""
    said = f"{status} {reason}".strip()
    if status in (404, 410):
        return DownloadError(DownloadErrorKind.NOT_FOUND,
                             f"There is no file at {url} (the server said {said}). Check the "
                             f"address; the model may have been moved or removed.")
    if status == 401:
        return DownloadError(DownloadErrorKind.NEEDS_LOGIN,
                             f"{host_of(url)} wants a login before it gives out {url} (it said "
                             f"{said}). Kestrel cannot log in: download the file in a browser,",
                             then_import=True)
    return DownloadError(DownloadErrorKind.REFUSED,
                         f"{host_of(url)} refused to give out {url} (it said {said}). If the "
                         f"model needs its licence accepted, do that on the website, download "
                         f"the file in a browser,", then_import=True)


def gave_up(url: str, reason: str, tries: int, server_fault: bool) -> DownloadError:
    """A transient failure that lasted through every retry."""
    if server_fault:
        return DownloadError(DownloadErrorKind.SERVER,
                             f"The server at {host_of(url)} kept failing ({reason}) after "
                             f"{tries} tries. What has arrived is kept: start the download "
                             f"again later to continue from there.")
    return DownloadError(DownloadErrorKind.NETWORK,
                         f"Could not download from {host_of(url)}: {reason} ({tries} tries). "
                         f"Check the network connection, then start the download again; "
                         f"what has arrived is kept and it continues from there.")


_OFFLINE = {
    # Said after a catalog click too, where no one typed an address: the spelling is for a link pasted.
    "lookup": "no network connection? Its name could not be looked up. Check that this computer "
              "is online (and, for a link you pasted, that it is spelled right), then try again.",
    "lookup_timeout": "no network connection? Looking up its name got no answer in time. Check "
                      "that this computer is online, then try again.",
    "no_route": "no network connection? There is no route to it from this computer. Check that "
                "this computer is online, then try again.",
    "refused": "it refused the connection: nothing is listening there, or a firewall or proxy "
               "said no. Check the address (and that the server is running), then try again.",
}


def unreachable(host: str, why: str, kept: bool) -> DownloadError:
    """The first try could not reach the host at all; why is Unreachable.why."""
    after = " What had arrived before is kept; the download continues from there." if kept else ""
    return DownloadError(DownloadErrorKind.NETWORK, f"Could not reach {host}: {_OFFLINE[why]}{after}")


def waits_too_long(url: str, reason: str, seconds: float) -> DownloadError:
    """A busy server asked for a wait longer than Kestrel holds a download open."""
    minutes = max(1, round(seconds / 60))
    return DownloadError(DownloadErrorKind.SERVER,
                         f"The server at {host_of(url)} is busy ({reason}) and asks Kestrel to wait "
                         f"about {minutes} minute{'s' if minutes > 1 else ''} before trying again. "
                         f"Start the download again after that; what has arrived is kept.")
