"""The model's doors: the model in use (ModelDoor) and the model manager's library (LibraryDoor)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from app.engine.protocol import Loaded
from app.library.installed import InstalledModel
from app.service.events import ModelState
from app.service.library.hardware_overview import hardware_overview
from app.service.models.engine_errors import EngineError

if TYPE_CHECKING:
    from app.service.library.downloads import DownloadQueue
    from app.service.root import Service


class ModelDoor:
    """The model in use and its engine, for the status line, the chat's empty page, the hardware
    window and the CLI's `chat` and `serve`: which model, its state and why, where it runs;
    loading one (the state says loading, ready or failed and why), cancelling the starter's
    set-up, clearing the saved chat states, and the hardware report."""

    def __init__(self, service: Service) -> None:
        session = service.session
        self._session = session
        self.load_model = session.load_model
        self.cancel_setup = session.setup.cancel
        self.clear_saved_states = session.clear_saved_states
        self.hardware_overview = partial(hardware_overview, session)

    @property
    def model(self) -> InstalledModel | None:
        """The model loaded, or being loaded."""
        return self._session.model

    @property
    def app_model(self) -> InstalledModel | None:
        """The app's model (the default's, for chats that have none of their own); not a chat's own model loaded
        to answer it, such as one on a server."""
        return self._session.app_model

    @property
    def model_state(self) -> ModelState:
        return self._session.state

    @property
    def model_detail(self) -> str:
        return self._session.detail

    @property
    def load_error(self) -> EngineError | None:
        return self._session.load_error

    @property
    def loaded(self) -> Loaded | None:
        """Where the engine runs the model now (None while none is loaded)."""
        return self._session.loaded


class LibraryDoor:
    """The model manager's, the first-run offer's and the Documents window's calls: the models
    and the catalog listed (LibraryListed, CatalogListed), a model added, removed, loaded or
    made the default, its settings, downloads from the catalog, a link or the Hugging Face
    search, and the downloads queue (None until the service opened, and in the CLI)."""

    def __init__(self, service: Service) -> None:
        library = service.library
        self._library = library
        self.refresh = library.refresh
        self.recommended = library.recommended
        self.add = library.add
        self.add_folder = library.add_folder
        self.remove = library.remove
        self.set_defaults = library.set_defaults
        self.set_default = library.set_default
        self.load = library.load
        self.download = library.download
        self.look_up = library.look_up
        self.download_unit = library.download_unit
        self.hub_search = library.hub.search
        self.hub_choices = library.hub.choices
        # Models → Speech (SpeechListed): the speech models and voices listed, downloaded, removed or chosen.
        speech = service.speech
        self.speech_refresh = speech.refresh
        self.speech_download = speech.download
        self.speech_remove = speech.remove
        self.speech_use = speech.use
        self.speech_usable = speech.usable

    @property
    def downloads(self) -> DownloadQueue | None:
        return self._library.downloads
