""""Find servers on this PC": the usual loopback ports asked once, briefly, only when the person asks; and
programs whose port changes (Foundry Local), asked where they listen."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from app.library.servers.faults import ServerFault
from app.library.servers.foundry_local import foundry_local_url
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
class AskedWhere:
    """A program whose port changes at each start: `where` asks it (its own command) for its address on this
    PC, None when it is not installed or not running; the address is then checked as a usual port is."""

    kind: ServerKind
    program: str
    path: str
    where: Callable[[], str | None]


ASKED_WHERE: tuple[AskedWhere, ...] = (
    AskedWhere(ServerKind.OPENAI, "Foundry Local", "/models", foundry_local_url),
)


@dataclass(frozen=True)
class FoundServer:
    """A server found on this PC, ready to be added: a name to suggest, its address and kind."""

    name: str
    url: str
    kind: ServerKind
    program: str


def find_on_this_pc(ports: tuple[UsualPort, ...] = USUAL_PORTS, host: str = "127.0.0.1",
                    asked_where: tuple[AskedWhere, ...] = ASKED_WHERE) -> list[FoundServer]:
    """The usual ports of this PC that answer as their program's API, in the order of `ports`, then the
    programs of `asked_where` that say where they listen and answer there.

    Each is asked once, all at the same time, with a short wait; nothing else is contacted."""
    with ThreadPoolExecutor(max_workers=max(1, len(ports) + len(asked_where))) as pool:
        usual = pool.map(lambda port: _probe(f"http://{host}:{port.port}", port.kind, port.program, port.path),
                         ports)
        asked = pool.map(_ask_where, asked_where)
        answers = [*usual, *asked]
    return [found for found in answers if found is not None]


def _ask_where(program: AskedWhere) -> FoundServer | None:
    url = program.where()
    return _probe(url, program.kind, program.program, program.path) if url else None


def _probe(url: str, kind: ServerKind, program: str, path: str) -> FoundServer | None:
    candidate = AddedServer(program.lower().replace(" ", "-"), kind, url)
    try:
        data = get_json(Asking(candidate, None, PROBE_WAIT_S), path)
    except ServerFault:
        return None
    speaks = (isinstance(data, dict) and "version" in data if kind == ServerKind.OLLAMA
              else isinstance(data, dict) and isinstance(data.get("data"), list))
    return FoundServer(candidate.name, url, kind, program) if speaks else None
