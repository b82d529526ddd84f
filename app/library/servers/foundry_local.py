"""Foundry Local's service on this PC: its port changes at each start, so its own command says where it listens.

Its CLI from 0.10 on runs a daemon, `foundry server`: `foundry server status --output json` says where it
listens in `webUrls` (a list of base URLs), as the public projects that find it read it (microsoft/aspire
#19213 and others; Kestrel has no recording of it: unverified). Before 0.10, `foundry service status`
printed a line such as "🟢 Model management service is running on http://127.0.0.1:55064/openai/status"
(recorded: tests/fixtures/foundry_local/). Either way the service answers OpenAI's API under that address's
/v1, which finding asks before offering it. Only Windows and macOS have Foundry Local; only a loopback
address is taken from what a command prints, so nothing off this PC is ever contacted.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable

# The newer CLI's command first; the older CLI answers it with an error and is asked its own.
STATUS_COMMANDS = (("server", "status", "--output", "json"), ("service", "status"))
STATUS_WAIT_S = 10.0  # the command asks the service over its pipe; a service that hangs is not waited for
PLATFORMS = ("win32", "darwin")  # where Foundry Local is installed (winget, brew)
# "… running on http://127.0.0.1:PORT/openai/status": the address after "on", on this PC only. A failure's
# words name the address too ("Request to local service failed. Uri:http://…"), but not after "on".
_RUNNING_ON = re.compile(r"\bon (http://(?:127\.0\.0\.1|localhost|\[::1\]):(\d{1,5}))(?:/\S*)?", re.IGNORECASE)
_LOOPBACK_URL = re.compile(r"(http://(?:127\.0\.0\.1|localhost|\[::1\]):(\d{1,5}))/?", re.IGNORECASE)


def endpoint_in(status: str) -> str | None:
    """The service's address ("http://127.0.0.1:55064") in what a status command printed: the newer CLI's
    JSON (its first loopback entry of `webUrls`) or the older one's running line; None when it says the
    service is not running, failed, or names only addresses off this PC."""
    urls = _web_urls(status)
    if urls is not None:
        for url in urls:
            match = _LOOPBACK_URL.fullmatch(url.strip()) if isinstance(url, str) else None
            if match is not None and 1 <= int(match.group(2)) <= 65535:
                return match.group(1).lower()
        return None
    for match in _RUNNING_ON.finditer(status):
        if 1 <= int(match.group(2)) <= 65535:
            return match.group(1).lower()
    return None


def _web_urls(status: str) -> list[object] | None:
    """The `webUrls` of the newer CLI's JSON (status lines may come before it), None when there is no such JSON.
    Its `running` flag is not trusted: one project found it stale while the daemon served; /v1 is asked anyway."""
    start = status.find("{")
    if start < 0:
        return None
    try:
        printed, _ = json.JSONDecoder().raw_decode(status[start:])
    except ValueError:
        return None
    if not isinstance(printed, dict) or not isinstance(printed.get("webUrls"), list):
        return None
    return list(printed["webUrls"])


def foundry_local_url(platform: str = sys.platform,
                      run_status: Callable[[tuple[str, ...]], str | None] | None = None) -> str | None:
    """Where Foundry Local's service listens now, as its status command says (the newer CLI's, then the
    older one's); None on other systems (nothing is run), when Foundry Local is not installed, or when its
    service is not running."""
    if platform not in PLATFORMS:
        return None
    for args in STATUS_COMMANDS:
        printed = (run_status or _run_status)(args)
        if printed is None:  # no foundry command at all
            return None
        if (url := endpoint_in(printed)) is not None:
            return url
    return None


def _run_status(args: tuple[str, ...]) -> str | None:
    """What `foundry ARGS` printed (stdout and stderr), or None when there is no such program or it did not
    finish in STATUS_WAIT_S."""
    program = shutil.which("foundry")
    if program is None:
        return None
    # No console window flashes up on Windows while it runs.
    flags = getattr(subprocess, "CREATE_NO_WINDOW", 0)
    try:
        done = subprocess.run([program, *args], capture_output=True, timeout=STATUS_WAIT_S, text=True,
                              encoding="utf-8", errors="replace", stdin=subprocess.DEVNULL, creationflags=flags)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout or "") + "\n" + (done.stderr or "")
