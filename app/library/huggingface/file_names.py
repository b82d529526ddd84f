"""Names from outside (a repository listing, a URL) as file names Kestrel will save, and as text it shows.

The rules hold on every OS, since a models folder made on Linux may be copied to
Windows: a name Windows cannot hold, or holds as a device, is refused everywhere.
"""

from __future__ import annotations

import re
import unicodedata

MAX_PART_BYTES = 200   # one name; leaves room for ".part.json" under every file system's 255
MAX_PATH_CHARS = 500   # a whole path in a repository
MAX_DEPTH = 16         # folders in a repository path
SHOWN_CHARS = 120      # a name in a message or a list

# Windows opens these as devices whatever the extension (CON.gguf is the console), with
# trailing spaces or dots ignored; COM¹ and LPT¹ too.
_DEVICE = re.compile(r"^(con|prn|aux|nul|conin\$|conout\$|(com|lpt)[0-9\u00b9\u00b2\u00b3])$", re.IGNORECASE)
_WINDOWS_FORBIDDEN = frozenset('<>:"|?*\\')
# Marks that change the direction text is shown in: "model\u202efpp.gguf" shows as
# "modelfgg.ppf"-like text, so a name would read as something it is not.
_DIRECTION_MARKS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def name_problem(path: str) -> str | None:
    """Why a "/"-separated relative path cannot be saved as is, in words; None when it can."""
    parts = path.split("/")
    for part in parts:
        problem = _part_problem(part)
        if problem is not None:
            return problem
    if len(path) > MAX_PATH_CHARS or len(parts) > MAX_DEPTH:
        return f"is longer than the {MAX_PATH_CHARS} characters or {MAX_DEPTH} folders a path may have"
    return None


def _part_problem(part: str) -> str | None:
    if part in ("", ".", ".."):
        return "is not a relative path inside the repository"
    if len(part.encode("utf-8", "surrogatepass")) > MAX_PART_BYTES:
        return f"is longer than the {MAX_PART_BYTES} bytes a file name may have"
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in part):
        return "holds a control character"
    if any(c in _DIRECTION_MARKS for c in part):
        return "holds a right-to-left or other direction mark, which makes a name show as another"
    if any(c in _WINDOWS_FORBIDDEN for c in part):
        return 'holds a character Windows does not allow in file names (one of < > : " | ? * \\)'
    if part[-1] in " .":
        return "ends with a space or a dot, which Windows drops"
    if _DEVICE.match(part.split(".")[0].rstrip(" ")):
        return "is a name Windows keeps for a device"
    return None


def plain_file_name(name: str) -> bool:
    """A name without folders, not hidden, that every OS can hold."""
    return "/" not in name and not name.startswith(".") and name_problem(name) is None


def shown(text: str, limit: int = SHOWN_CHARS) -> str:
    """Text from outside as it may be printed: control and direction marks as U+FFFD, and
    cut to limit characters with an ellipsis."""
    safe = "".join("\ufffd" if unicodedata.category(c) in ("Cc", "Cs") or c in _DIRECTION_MARKS else c
                   for c in text)
    return safe if len(safe) <= limit else safe[:limit - 1] + "…"
