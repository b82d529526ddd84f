"""Whether the open chat's model can see images, and the words for why not: cheap, for the window to ask at any time."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from app.engine.protocol import Loaded
from app.library.installed import InstalledModel
from app.service.events import ModelState
from app.service.models.model_session import ModelSession
from app.service.chats.open_chat import OpenChat

NO_MODEL = ("No model is ready to look at images. Get a model tagged Vision, such as Gemma 3 4B (Get a model), "
            "then attach the image again.")


@dataclass(frozen=True)
class VisionState:
    """available: the chat's model takes images (its projector is paired, and loaded where the
    model is); reason: "" when available, else the words to show (what is missing, what to do)."""

    available: bool
    reason: str


def no_projector(title: str) -> str:
    return (f"{title} cannot see images: it has no vision projector. Choose a model tagged Vision, such as "
            "Gemma 3 4B (Get a model).")


def not_said_to_see(title: str) -> str:
    """A model on a server the person added that neither its server nor the person says takes images."""
    return (f"{title} cannot see images: its server does not say that it takes them. Choose a model tagged Vision, "
            "such as Gemma 3 4B (Get a model).")


def vision_state(model: InstalledModel | None, loaded: Loaded | None) -> VisionState:
    """For `model`, with `loaded` the engine's facts when it is the model in the engine now (None:
    not loaded yet, so its projector's pairing, or what a remote model's server said, is all there is to go by)."""
    if model is None:
        return VisionState(False, NO_MODEL)
    if not model.vision:
        return VisionState(False, not_said_to_see(model.title) if model.remote else no_projector(model.title))
    if loaded is None or loaded.vision:
        return VisionState(True, "")
    return VisionState(False, loaded.vision_problem or (
        f"{model.title}'s vision projector did not load, so it answers text only. Choose the model again in the "
        "model manager to reload it, or choose another model tagged Vision."))


class ChatVision:
    """Which model the open chat would answer with, and whether it sees: from values already in
    memory (the session's models, the library's last listing), no disk and no engine.

    chat_model_id: the open chat's own choice (None: the default model). session_models: the
    model in the engine and the app's model; loaded: the engine's facts while a model is READY;
    listed: the library's models as last listed (a chat's own model is found there); remote: a chat's model
    on a server the person added, by its SERVER/MODEL id, from memory (RemoteServers.known).
    """

    def __init__(self, *, chat_model_id: Callable[[], str | None],
                 session_models: Callable[[], tuple[InstalledModel | None, InstalledModel | None]],
                 loaded: Callable[[], Loaded | None], state: Callable[[], ModelState],
                 listed: Callable[[], Iterable[InstalledModel]],
                 remote: Callable[[str], InstalledModel | None] = lambda _id: None) -> None:
        self._chat_model_id, self._session_models = chat_model_id, session_models
        self._loaded, self._state, self._listed = loaded, state, listed
        self._remote = remote

    def model(self) -> InstalledModel | None:
        """The model the open chat would answer with: its own if known here and not missing, else
        the app's (the answer falls back the same way, answering.py)."""
        in_engine, app_model = self._session_models()
        default = app_model or in_engine
        wanted = self._chat_model_id()
        if wanted is None or (default is not None and default.id == wanted):
            return default
        for model in (in_engine, app_model, *self._listed()):
            if model is not None and model.id == wanted and not model.missing:
                # Still in the engine, but its server was removed since: the default answers (answering.py).
                return model if not model.remote or self._remote(wanted) is not None else default
        return self._remote(wanted) or default

    def state(self) -> VisionState:
        model = self.model()
        in_engine, _ = self._session_models()
        loaded = self._loaded()
        here = (model is not None and in_engine is not None and in_engine.id == model.id
                and self._state() == ModelState.READY and loaded is not None)
        return vision_state(model, loaded if here else None)


def chat_vision(chat: OpenChat, session: ModelSession, listed: Callable[[], Iterable[InstalledModel]],
                remote: Callable[[str], InstalledModel | None] = lambda _id: None) -> ChatVision:
    """The open chat's ChatVision, from the session's models, the library's listing (`listed`) and the
    servers added (`remote`)."""
    return ChatVision(chat_model_id=chat.model_id, session_models=lambda: (session.model, session.app_model),
                      loaded=lambda: session.loaded, state=lambda: session.state, listed=listed, remote=remote)


def model_vision(model_id: Callable[[], str | None], session: ModelSession,
                 listed: Callable[[], Iterable[InstalledModel]]) -> ChatVision:
    """The ChatVision of a chat whose own model is `model_id()` (None: the app's; quick ask's chat)."""
    return ChatVision(chat_model_id=model_id, session_models=lambda: (session.model, session.app_model),
                      loaded=lambda: session.loaded, state=lambda: session.state, listed=listed)
