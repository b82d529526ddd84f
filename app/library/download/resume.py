"""What a part was started from, kept beside it, so a resume never splices two versions of a file.

`<name>.part.json` holds the validator of the answer whose body began the part (its
strong ETag, else its Last-Modified), and the size and SHA-256 the server stated then.
A resume sends the validator as If-Range: a server that follows RFC 9110 answers a
changed file with all of it (200); one that does not is caught by comparing the
validator of its 206 with the stored one. A part without this file (left by an older
Kestrel) resumes as before; one whose file cannot be read starts over.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app.core.files import write_atomically
from app.library.download.nofollow import Found, look_at, open_regular
from app.library.download.transport import Answer

VERSION = 1
_MAX_BYTES = 4096  # a validator, a size and a hash: anything longer is not this file


@dataclass(frozen=True)
class StartedFrom:
    """The validator (an If-Range value) and what the server stated when the part began."""

    validator: str | None
    size: int | None
    sha256: str | None


class Unreadable(Exception):
    """The file beside a part is damaged or not a file of ours: the part cannot be trusted."""


def validator_of(answer: Answer) -> str | None:
    """A strong ETag (a weak one cannot be used in If-Range), else Last-Modified."""
    etag = answer.response.getheader("ETag")
    if etag is not None and etag.strip().startswith('"') and len(etag) <= 512:
        return etag.strip()
    modified = answer.response.getheader("Last-Modified")
    return modified.strip() if modified is not None and 0 < len(modified) <= 100 else None


def still_valid(stored: str, answer: Answer) -> bool:
    """Whether a 206 comes from the file the part began with: same ETag, or same date."""
    header = "ETag" if stored.startswith('"') else "Last-Modified"
    given = answer.response.getheader(header)
    return given is not None and given.strip() == stored


def facts_path(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def read(part: Path) -> StartedFrom | None:
    """What the part began from; None when no file says (an older Kestrel's part)."""
    path = facts_path(part)
    if look_at(path) is Found.NOTHING:
        return None
    try:
        with open_regular(path, append=False) as file:
            raw = file.read(_MAX_BYTES + 1)
        if len(raw) > _MAX_BYTES:
            raise ValueError("too long")
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError("not this file")
        validator, size, sha256 = data.get("validator"), data.get("size"), data.get("sha256")
        if not (validator is None or isinstance(validator, str)) or \
                not (size is None or (isinstance(size, int) and not isinstance(size, bool) and size >= 0)) or \
                not (sha256 is None or isinstance(sha256, str)):
            raise ValueError("wrong types")
    except (OSError, ValueError, RecursionError):
        raise Unreadable(str(path)) from None
    return StartedFrom(validator, size, sha256)


def write(part: Path, started: StartedFrom) -> None:
    """Written before the first byte of the part, so an interrupt leaves both or neither."""
    data = {"version": VERSION, "validator": started.validator, "size": started.size,
            "sha256": started.sha256}
    write_atomically(facts_path(part), json.dumps(data).encode("utf-8"))


def forget(part: Path) -> None:
    """Remove the file beside the part (a name only: never what a link leads to)."""
    path = facts_path(part)
    if look_at(path) in (Found.OURS, Found.NAME_ONLY):
        path.unlink(missing_ok=True)
