""""Find servers on this PC": the usual loopback ports asked once, briefly, only when the person asks."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from app.library.servers.faults import ServerFault
from app.library.servers.records import AddedServer, ServerKind
from app.library.servers.wire import Asking, get_json

PROBE_WAIT_S = 1.0  # a server on this PC answers these small requests at once


@dataclass(frozen=True)
class UsualPort:
    """A port a known server program listens on by default, and what it speaks."""

    port: int
    kind: ServerKind
    program: str
    path: str  # what is asked: a small answer only that kind gives


USUAL_PORTS: tuple[UsualPort, ...] = (
    UsualPort(11434, ServerKind.OLLAMA, "Ollama", "/api/version"),
    UsualPort(1234, ServerKind.OPENAI, "LM Studio", "/models"),
    UsualPort(8080, ServerKind.OPENAI, "llama-server", "/models"),
)


@dataclass(frozen=True)
class FoundServer:
    """A server found on this PC, ready to be added: a name to suggest, its address and kind."""

    name: str
    url: str
    kind: ServerKind
    program: str


def find_on_this_pc(ports: tuple[UsualPort, ...] = USUAL_PORTS, host: str = "127.0.0.1") -> list[FoundServer]:
    """The usual ports of this PC that answer as their program's API, in the order of `ports`.

    Each is asked once, all at the same time, with a short wait; nothing else is contacted."""
    with ThreadPoolExecutor(max_workers=max(1, len(ports))) as pool:
        answers = list(pool.map(lambda usual: _probe(usual, host), ports))
    return [found for found in answers if found is not None]


def _probe(usual: UsualPort, host: str) -> FoundServer | None:
    url = f"http://{host}:{usual.port}"
    candidate = AddedServer(usual.program.lower().replace(" ", "-"), usual.kind, url)
    try:
        data = get_json(Asking(candidate, None, PROBE_WAIT_S), usual.path)
    except ServerFault:
        return None
    speaks = (isinstance(data, dict) and "version" in data if usual.kind == ServerKind.OLLAMA
              else isinstance(data, dict) and isinstance(data.get("data"), list))
    return FoundServer(candidate.name, url, usual.kind, usual.program) if speaks else None
