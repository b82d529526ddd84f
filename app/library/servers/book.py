"""ServerBook: the person's servers with their keys, their models, and a remote model made a chat model like a local one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.core.paths import DataPaths
from app.library.installed import InstalledModel
from app.library.model_files.model_purpose import ModelPurpose
from app.library.servers.faults import ServerFacts, ServerFault, ServerTrouble
from app.library.servers.keys import KeptKey, ServerKeys, keys_file
from app.library.servers.link_pairing import pair, this_device_name
from app.library.servers.listing import list_models
from app.library.servers.records import (DEFAULT_WAIT_S, AddedServer, ModelAbility, ModelOverride, RemoteModel,
                                         ServerKind, checked_name, checked_url, split_model_id)
from app.library.servers.server_list import ServerList, servers_file


@dataclass(frozen=True)
class ServerAdded:
    """A server just added, and where its key went (None: no key was given)."""

    server: AddedServer
    key: KeptKey | None


class ServerBook:
    """The servers list and the keys together. Only `models` contacts a server; nothing else does.

    Blocking (files, the keyring, HTTP): the service calls it off the event loop."""

    def __init__(self, servers: ServerList, keys: ServerKeys) -> None:
        self.servers = servers
        self.keys = keys

    @classmethod
    def at(cls, paths: DataPaths) -> ServerBook:
        """The person's own: the files the engine's remote backend reads too."""
        return cls(ServerList(servers_file(paths)), ServerKeys(keys_file(paths)))

    def list(self) -> tuple[AddedServer, ...]:
        return self.servers.list()

    def get(self, name: str) -> AddedServer | None:
        return self.servers.get(name)

    def add(self, name: str, url: str, kind: ServerKind, key: str | None = None, *,
            wait_s: float = DEFAULT_WAIT_S, pin: str = "") -> ServerAdded:
        """Add a server and keep its key; ValueError in words for a bad name, address or wait, or a name taken."""
        server = self.servers.add(name, url, kind, wait_s=wait_s, pin=pin)
        kept = None
        if key:
            try:
                kept = self.keys.set(server.name, key)
            except OSError:
                self.servers.remove(server.name)  # a server without the key it needs would only fail later
                raise
        return ServerAdded(server, kept)

    def pair(self, name: str, url: str, code: str, *, device: str | None = None,
             wait_s: float = DEFAULT_WAIT_S) -> ServerAdded:
        """Pair with another Kestrel (Kestrel Link) and add it, its key kept and its certificate pinned.

        ValueError in words for a bad name, address or code (nothing contacted); PairingRefused in words
        when the other PC or its certificate refuses (nothing kept)."""
        checked_name(name)
        address = checked_url(url)
        if self.servers.get(name) is not None:
            raise ValueError(f'A server called "{name.strip()}" is added already: choose another name, or remove '
                             "that one first.")
        paired = pair(address, code, device or this_device_name(), name=name.strip())
        return self.add(name, address, ServerKind.KESTREL, paired.key, wait_s=wait_s, pin=paired.fingerprint)

    def remove(self, name: str) -> AddedServer | None:
        """Forget a server and its key; the one removed, or None when none has that name."""
        removed = self.servers.remove(name)
        if removed is not None:
            self.keys.delete(removed.name)
        return removed

    def set_key(self, name: str, key: str) -> KeptKey:
        """Keep a new key for a server (empty: forget it); LookupError when no server has that name."""
        server = self._server(name)
        return self.keys.set(server.name, key)

    def set_override(self, name: str, model: str, override: ModelOverride) -> AddedServer:
        return self.servers.set_override(name, model, override)

    def models(self, name: str) -> tuple[RemoteModel, ...]:
        """The models the server lists now (it is contacted); ServerFault in words when it cannot say,
        NOT_ADDED when no server has that name."""
        server = self.servers.get(name)
        if server is None:
            raise ServerFault(ServerFacts(name, "", ServerTrouble.NOT_ADDED))
        return list_models(server, self.keys.get(server.name))

    def named(self, model_id: str) -> RemoteModel | None:
        """The remote model "SERVER/MODEL" names, as the person set it, without contacting the server; None
        when the part before the slash is no added server (the server says at load whether it has the model)."""
        parts = split_model_id(model_id)
        server = self.servers.get(parts[0]) if parts is not None else None
        if parts is None or server is None:
            return None
        return RemoteModel(server.name, parts[1]).with_override(server.overrides.get(parts[1]))

    def chat_model(self, model_id: str) -> InstalledModel | None:
        """The remote model "SERVER/MODEL" names as the model session loads it; None as for `named`."""
        model = self.named(model_id)
        server = self.servers.get(model.server) if model is not None else None
        return as_chat_model(model, server) if model is not None and server is not None else None

    def _server(self, name: str) -> AddedServer:
        server = self.servers.get(name)
        if server is None:
            raise LookupError(f'No server called "{name}" is added.')
        return server


def as_chat_model(model: RemoteModel, server: AddedServer) -> InstalledModel:
    """A remote model as the model session loads it: the library's record of a model, whose address the
    engine's remote backend loads. Not written to the models folder; its path names no file."""
    embeds_only = model.abilities_known and model.abilities == frozenset({ModelAbility.EMBEDDINGS})
    return InstalledModel(model.id, f"{model.name} on {server.name}", Path(server.name, model.name), model.size,
                          None, f"{server.name} ({server.url})", server.added, "remote",
                          purpose=ModelPurpose.EMBEDDING if embeds_only else ModelPurpose.CHAT,
                          address=model.address, sees_images=ModelAbility.VISION in model.abilities)
