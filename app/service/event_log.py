"""What the service's events leave in Kestrel's log: failures, engine deaths, downloads, API requests.

One subscriber (`EventLog.heard`) rather than a log call in each owner, so what the log may hold is
decided in one place: never a message's text, a prompt, a file's contents or a key. A request is
logged by its endpoint, status and token counts (RequestRecord holds no body); a Problem's
sentence with its quoted words (a chat's title is its first message) taken out.
"""

from __future__ import annotations

import logging

from app.core.app_log import without_private
from app.service.events import (AnswerInterrupted, ApiRequestLogged, InterruptReason, ModelState,
                                ModelStateChanged, Problem)
from app.service.library_events import DownloadChanged, DownloadId, DownloadState

log = logging.getLogger(__name__)

_OVER = {DownloadState.DONE: logging.INFO, DownloadState.FAILED: logging.WARNING,
         DownloadState.CANCELLED: logging.INFO}
_ENGINE_ENDS = (InterruptReason.ENGINE_DIED, InterruptReason.ENGINE_FAILED)


class EventLog:
    """Subscribe `heard` to a service (before start-up, to catch its first failures)."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self._log = logger
        self._downloads: dict[DownloadId, DownloadState] = {}  # the last state logged of each

    def heard(self, event: object) -> None:
        if isinstance(event, Problem):
            self._log.warning("problem (%s): %s", event.kind, without_private(event.text))
        elif isinstance(event, ModelStateChanged):
            self._model(event)
        elif isinstance(event, AnswerInterrupted) and event.reason in _ENGINE_ENDS:
            what = "the engine died" if event.reason == InterruptReason.ENGINE_DIED else "the engine failed"
            self._log.error("%s during an answer: %s", what, without_private(event.detail))
        elif isinstance(event, DownloadChanged):
            self._download(event)
        elif isinstance(event, ApiRequestLogged):
            record = event.record
            self._log.info("API %s from %s: %d, model %s, %d tokens in, %d out", record.endpoint, record.client,
                           record.status, record.model or "none", record.prompt_tokens, record.completion_tokens)

    def _model(self, event: ModelStateChanged) -> None:
        if event.state == ModelState.FAILED:
            self._log.error("model failed to load: %s", without_private(event.detail))
        elif event.state == ModelState.READY and event.loaded is not None:
            loaded = event.loaded
            self._log.info("model %s ready on %s in %.0f ms%s", loaded.model_path, loaded.device, loaded.load_ms,
                           "".join(f"; fell back: {reason}" for reason in loaded.fallback_reasons))

    def _download(self, event: DownloadChanged) -> None:
        item = event.item
        level = _OVER.get(item.state)
        if self._downloads.get(item.id) == item.state:
            return  # the same state said again (a list refresh): logged once
        self._downloads[item.id] = item.state
        if level is None:
            if item.state == DownloadState.RUNNING:
                self._log.info("download of %s running from %s at %d bytes", item.title, item.source or "the catalog",
                               item.done)
            return
        self._log.log(level, "download of %s %s after %d bytes%s", item.title, item.state.value, item.done,
                      f": {without_private(item.message)}" if item.message else "")
