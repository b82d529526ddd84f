"""RemoteServers: the person's servers for every front end, their models, and one of them loaded as the chat's model.

Every call reads files, a credential store or a server, so each runs on a worker thread, never the
event loop. Nothing here contacts a server on its own: only `models` (the person asked for a server's
list), `check` (the person pressed Check or Add), `find_on_this_pc` (the person pressed "Find servers on
this PC") and `load` (the engine checks the server answers and has the model).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from app.library.installed import InstalledModel
from app.library.servers.book import ServerAdded, ServerBook, as_chat_model
from app.library.servers.faults import ServerFacts, ServerFault, ServerTrouble
from app.library.servers.finding import ASKED_WHERE, USUAL_PORTS, FoundServer, UsualPort, find_on_this_pc
from app.library.servers.keys import KeptKey
from app.library.servers.listing import list_models
from app.library.servers.records import (DEFAULT_WAIT_S, AddedServer, ModelOverride, RemoteModel, ServerKind,
                                         checked_name, checked_url, split_model_id)
from app.service.models.model_session import ModelSession

# How long the API server's model list uses a server's last answer (or its silence) before asking it again:
# a tool that lists models before each request must not wait on a computer that is off each time.
API_LIST_FRESH_S = 60.0


def answers_from(model: InstalledModel | None) -> str | None:
    """Where a chat's messages go when its model is on a server the person added, as the library words it
    ("studio-pc (http://192.168.1.20:11434)": as_chat_model's source); None when this PC answers."""
    return model.source if model is not None and model.remote else None


class AnswersBusy(Exception):
    """A server's model was not loaded: an answer is being written or waits; str() says what to do."""

    def __init__(self, model: RemoteModel) -> None:
        super().__init__(f"{model.name} on {model.server} was not loaded: an answer is being written. Wait for it "
                         "to finish, or press Stop, then choose Use this model again (loading another model now "
                         "would take the engine from under that answer).")


class RemoteServers:
    """The servers list, keys and models (ServerBook) off the loop, and the model session for loading one.

    Keeps in memory what it last read, so the window can ask at any time without a disk or a server:
    `listed()` (each server's models as last listed) and `known(model_id)` (a chat's remote model by its
    SERVER/MODEL id, from the servers list as last read). usual_ports and asked_where: where "Find servers on
    this PC" looks (a test points them at its own loopback server). answers_busy: an answer is written or waits (then `load`
    refuses: AnswersBusy)."""

    def __init__(self, book: ServerBook, session: ModelSession, *,
                 usual_ports: tuple[UsualPort, ...] = USUAL_PORTS,
                 answers_busy: Callable[[], bool] = lambda: False) -> None:
        self._book = book
        self._session = session
        self.usual_ports = usual_ports
        self.asked_where = ASKED_WHERE
        self.answers_busy = answers_busy
        self._servers: tuple[AddedServer, ...] | None = None  # as last read (None: not read yet)
        self._listed: dict[str, tuple[RemoteModel, ...]] = {}  # by server name, as each last listed them
        self._asked_at: dict[str, float] = {}  # by server name: when it was last asked (monotonic), answered or not

    async def servers(self) -> tuple[AddedServer, ...]:
        """The servers added, oldest first (contacts none)."""
        return await asyncio.to_thread(self._read)

    def _read(self) -> tuple[AddedServer, ...]:
        servers = self._servers = self._book.list()
        names = {server.name for server in servers}
        self._listed = {name: models for name, models in self._listed.items() if name in names}
        return servers

    def listed(self) -> dict[str, tuple[RemoteModel, ...]]:
        """Each added server's models as it last listed them (no I/O): a server not asked yet is absent."""
        return dict(self._listed)

    def known(self, model_id: str) -> InstalledModel | None:
        """The remote model a chat names by SERVER/MODEL, as a chat model, from the servers as last read (the
        list is read once if it never was; no server is contacted); None when no added server has that name."""
        parts = split_model_id(model_id)
        if parts is None:
            return None
        servers = self._servers if self._servers is not None else self._read()
        server = next((s for s in servers if s.name.casefold() == parts[0].casefold()), None)
        if server is None:
            return None
        # As its server last listed it, where it did (what it said it takes: images), with the person's overrides.
        listed = next((m for m in self._listed.get(server.name, ()) if m.name == parts[1]), None)
        model = listed or RemoteModel(server.name, parts[1])
        return as_chat_model(model.with_override(server.overrides.get(parts[1])), server)

    def named(self, model_id: str) -> InstalledModel | None:
        """As `known`, with the servers list read now (blocking: the answering line calls it off the loop)."""
        if split_model_id(model_id) is None:
            return None
        self._read()
        return self.known(model_id)

    @property
    def last_problem(self) -> str | None:
        """Why the last read of the list showed fewer servers than the file holds (a damaged file), in words."""
        return self._book.servers.last_problem

    async def add(self, name: str, url: str, kind: ServerKind, key: str | None = None, *,
                  wait_s: float = DEFAULT_WAIT_S) -> ServerAdded:
        """Add a server and keep its key (ServerAdded.key.words says where). ValueError in words for a bad name,
        address or wait, or a name taken; ServerListError or OSError when the disk refuses. Contacts none:
        call `models` to check that it answers."""
        added = await asyncio.to_thread(lambda: self._book.add(name, url, kind, key, wait_s=wait_s))
        await self.servers()
        return added

    async def pair(self, name: str, url: str, code: str) -> ServerAdded:
        """Pair with another Kestrel (Kestrel Link) and add it, its key kept and its certificate pinned.
        ValueError in words for a bad name, address or code; PairingRefused in words when it refuses."""
        added = await asyncio.to_thread(self._book.pair, name, url, code)
        await self.servers()
        return added

    async def remove(self, name: str) -> AddedServer | None:
        """Forget a server and its key; None when none has that name."""
        removed = await asyncio.to_thread(self._book.remove, name)
        await self.servers()
        return removed

    async def set_key(self, name: str, key: str) -> KeptKey:
        """A new key for a server ("" forgets it); LookupError when no server has that name."""
        return await asyncio.to_thread(self._book.set_key, name, key)

    async def set_override(self, name: str, model: str, override: ModelOverride) -> AddedServer:
        """What the person sets by hand for one of a server's models (context length, abilities); what `listed`
        and `known` say holds it at once. LookupError when no server has that name."""
        server = await asyncio.to_thread(self._book.set_override, name, model, override)
        await self.servers()
        if server.name in self._listed:
            self._listed[server.name] = tuple(m.with_override(server.overrides.get(m.name)) if m.name == model else m
                                              for m in self._listed[server.name])
        return server

    async def models(self, name: str) -> tuple[RemoteModel, ...]:
        """The models the server lists now, with the person's overrides; ServerFault (str() in words) when it
        cannot say (the models it listed before are forgotten then)."""
        self._asked_at[name] = time.monotonic()
        try:
            models = await asyncio.to_thread(self._book.models, name)
        except ServerFault:
            self._listed.pop(name, None)
            raise
        if self._servers is None or all(server.name != name for server in self._servers):
            await self.servers()
        self._listed[name] = models
        return models

    async def for_api(self) -> tuple[RemoteModel, ...]:
        """Every added server's models for the API server's lists (/v1/models, /api/tags): each server as it
        answered within API_LIST_FRESH_S, else asked again now (all at once); one that does not answer lists
        none. The servers were added by the person to be used, and only they are contacted."""
        servers = await self.servers()
        now = time.monotonic()
        stale = [s.name for s in servers if now - self._asked_at.get(s.name, -API_LIST_FRESH_S) >= API_LIST_FRESH_S]
        for answer in await asyncio.gather(*(self.models(name) for name in stale), return_exceptions=True):
            if isinstance(answer, BaseException) and not isinstance(answer, ServerFault):
                raise answer  # a bug, not the server's doing
        return tuple(model for server in servers for model in self._listed.get(server.name, ()))

    async def check(self, name: str, url: str, kind: ServerKind, key: str | None = None) -> tuple[RemoteModel, ...]:
        """The models a server not yet added lists (it is contacted, and nothing is kept): whether the address,
        kind and key the person typed work before they add it. ValueError in words for a bad name or address;
        ServerFault in words when the server cannot say."""
        server = AddedServer(checked_name(name), kind, checked_url(url))
        return await asyncio.to_thread(list_models, server, key or None)

    async def find_on_this_pc(self) -> list[FoundServer]:
        """Ollama, LM Studio and llama-server on this PC's usual ports, and Foundry Local where it says it
        listens, asked once each, briefly."""
        return await asyncio.to_thread(find_on_this_pc, self.usual_ports, asked_where=self.asked_where)

    async def chat_model(self, model: RemoteModel) -> InstalledModel:
        """The remote model as the model session and a chat's model hold it (its id is SERVER/MODEL);
        ServerFault NOT_ADDED when its server was removed."""
        server = await asyncio.to_thread(self._book.get, model.server)
        if server is None:
            raise ServerFault(ServerFacts(model.server, "", ServerTrouble.NOT_ADDED, model=model.name))
        return as_chat_model(model, server)

    async def load(self, model: RemoteModel, *, for_chat: bool = False) -> bool:
        """Load the remote model in the engine as the app's model (or a chat's); the session's state says
        loading, ready, or failed with the server's words (load_error.failure: ServerFailed). AnswersBusy while
        an answer is written or waits, as a local model's Load refuses then (LibraryService.load)."""
        if self.answers_busy():
            raise AnswersBusy(model)
        return await self._session.load_model(await self.chat_model(model), for_chat=for_chat)
