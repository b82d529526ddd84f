"""ServersDoor: the model manager's "Add a server…" and "Find servers on this PC", and a server's models loaded."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.service.root import Service


class ServersDoor:
    """What the window's servers part calls, each a coroutine on the service's loop (blocking work runs on a
    worker thread): `servers()`, `add(name, url, kind, key, wait_s=)`, `remove(name)`, `set_key(name, key)`,
    `pair(name, url, code)` (Kestrel Link: another Kestrel, paired with its code),
    `set_override(name, model, override)`, `models(name)` (contacts that server; ServerFault in words),
    `check(name, url, kind, key)` (contacts a server not yet added and keeps nothing),
    `find_on_this_pc()`, `chat_model(remote_model)` (the InstalledModel a chat holds) and `load(remote_model)`
    (the model session's state and load_error say how it went, as for a local model: ModelDoor; AnswersBusy
    in words while an answer is written or waits). `listed()` and `known(model_id)` are plain calls that
    read only memory: each server's models as last listed, and a chat's SERVER/MODEL as a chat model.

    The calls are RemoteServers' own (app/service/library/remote_servers.py), handed over as they are."""

    def __init__(self, service: Service) -> None:
        remote = self._remote = service.servers
        self.servers = remote.servers
        self.add = remote.add
        self.pair = remote.pair
        self.remove = remote.remove
        self.set_key = remote.set_key
        self.set_override = remote.set_override
        self.models = remote.models
        self.check = remote.check
        self.find_on_this_pc = remote.find_on_this_pc
        self.chat_model = remote.chat_model
        self.load = remote.load
        self.listed = remote.listed
        self.known = remote.known

    @property
    def last_problem(self) -> str | None:
        """Why the list read last showed fewer servers than its file holds, in words (None: it read well)."""
        return self._remote.last_problem
