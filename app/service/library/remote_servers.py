"""RemoteServers: the person's servers for every front end, their models, and one of them loaded as the chat's model.

Every call reads files, a credential store or a server, so each runs on a worker thread, never the
event loop. Nothing here contacts a server on its own: only `models` (the person asked for a server's
list), `check` (the person pressed Check or Add), `find_on_this_pc` (the person pressed "Find servers on
this PC") and `load` (the engine checks the server answers and has the model).
"""

from __future__ import annotations

import asyncio

from app.library.installed import InstalledModel
from app.library.servers.book import ServerAdded, ServerBook, as_chat_model
from app.library.servers.faults import ServerFacts, ServerFault, ServerTrouble
from app.library.servers.finding import USUAL_PORTS, FoundServer, UsualPort, find_on_this_pc
from app.library.servers.keys import KeptKey
from app.library.servers.listing import list_models
from app.library.servers.records import (DEFAULT_WAIT_S, AddedServer, ModelOverride, RemoteModel, ServerKind,
                                         checked_name, checked_url)
from app.service.models.model_session import ModelSession


def answers_from(model: InstalledModel | None) -> str | None:
    """Where a chat's messages go when its model is on a server the person added, as the library words it
    ("studio-pc (http://192.168.1.20:11434)": as_chat_model's source); None when this PC answers."""
    return model.source if model is not None and model.remote else None


class RemoteServers:
    """The servers list, keys and models (ServerBook) off the loop, and the model session for loading one.

    usual_ports: where "Find servers on this PC" looks (a test points it at its own loopback server)."""

    def __init__(self, book: ServerBook, session: ModelSession, *,
                 usual_ports: tuple[UsualPort, ...] = USUAL_PORTS) -> None:
        self._book = book
        self._session = session
        self.usual_ports = usual_ports

    async def servers(self) -> tuple[AddedServer, ...]:
        """The servers added, oldest first (contacts none)."""
        return await asyncio.to_thread(self._book.list)

    @property
    def last_problem(self) -> str | None:
        """Why the last read of the list showed fewer servers than the file holds (a damaged file), in words."""
        return self._book.servers.last_problem

    async def add(self, name: str, url: str, kind: ServerKind, key: str | None = None, *,
                  wait_s: float = DEFAULT_WAIT_S) -> ServerAdded:
        """Add a server and keep its key (ServerAdded.key.words says where). ValueError in words for a bad name,
        address or wait, or a name taken; ServerListError or OSError when the disk refuses. Contacts none:
        call `models` to check that it answers."""
        return await asyncio.to_thread(lambda: self._book.add(name, url, kind, key, wait_s=wait_s))

    async def remove(self, name: str) -> AddedServer | None:
        """Forget a server and its key; None when none has that name."""
        return await asyncio.to_thread(self._book.remove, name)

    async def set_key(self, name: str, key: str) -> KeptKey:
        """A new key for a server ("" forgets it); LookupError when no server has that name."""
        return await asyncio.to_thread(self._book.set_key, name, key)

    async def set_override(self, name: str, model: str, override: ModelOverride) -> AddedServer:
        """What the person sets by hand for one of a server's models (context length, abilities)."""
        return await asyncio.to_thread(self._book.set_override, name, model, override)

    async def models(self, name: str) -> tuple[RemoteModel, ...]:
        """The models the server lists now, with the person's overrides; ServerFault (str() in words) when it
        cannot say."""
        return await asyncio.to_thread(self._book.models, name)

    async def check(self, name: str, url: str, kind: ServerKind, key: str | None = None) -> tuple[RemoteModel, ...]:
        """The models a server not yet added lists (it is contacted, and nothing is kept): whether the address,
        kind and key the person typed work before they add it. ValueError in words for a bad name or address;
        ServerFault in words when the server cannot say (NOT_YET for a kind Kestrel cannot chat with)."""
        server = AddedServer(checked_name(name), kind, checked_url(url))
        if kind == ServerKind.ANTHROPIC:
            raise ServerFault(ServerFacts(server.name, server.url, ServerTrouble.NOT_YET, kind_title=kind.described))
        return await asyncio.to_thread(list_models, server, key or None)

    async def find_on_this_pc(self) -> list[FoundServer]:
        """Ollama, LM Studio and llama-server on this PC's usual ports, asked once each, briefly."""
        return await asyncio.to_thread(find_on_this_pc, self.usual_ports)

    async def chat_model(self, model: RemoteModel) -> InstalledModel:
        """The remote model as the model session and a chat's model hold it (its id is SERVER/MODEL);
        ServerFault NOT_ADDED when its server was removed."""
        server = await asyncio.to_thread(self._book.get, model.server)
        if server is None:
            raise ServerFault(ServerFacts(model.server, "", ServerTrouble.NOT_ADDED, model=model.name))
        return as_chat_model(model, server)

    async def load(self, model: RemoteModel, *, for_chat: bool = False) -> bool:
        """Load the remote model in the engine as the app's model (or a chat's); the session's state says
        loading, ready, or failed with the server's words (load_error.failure: ServerFailed)."""
        return await self._session.load_model(await self.chat_model(model), for_chat=for_chat)
