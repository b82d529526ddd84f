"""A stand-in DocumentsService for window tests: the plan's API, its events sent through the service's bus."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from app.service import events as ev
from app.documents.collections import DocumentsError


class FakeDocuments:
    """Keeps collections in memory; records what the window asked of it in `calls`."""

    def __init__(self, emit: Callable[[ev.Event], None]) -> None:
        self._emit = emit
        self.infos: list[ev.CollectionInfo] = []
        self.file_lists: dict[str, tuple[ev.FileInfo, ...]] = {}
        self.chosen: str | None = None
        self.held = False  # the user's Pause
        self.calls: list[tuple[str, object]] = []

    def collections(self) -> tuple[ev.CollectionInfo, ...]:
        return tuple(self.infos)

    async def files(self, name: str) -> tuple[ev.FileInfo, ...]:
        self.calls.append(("files", name))
        return self.file_lists.get(name, ())

    async def add_folder(self, folder: Path, name: str | None = None) -> ev.CollectionInfo:
        self.calls.append(("add_folder", (folder, name)))
        name = name or folder.name
        if any(info.name == name for info in self.infos):
            raise DocumentsError(f"A collection named “{name}” already exists: choose another name.")
        info = ev.CollectionInfo(name=name, folder=folder, files=0, indexed=0, unreadable=0, chunks=0, vectors=0,
                                 last_indexed=None, state=ev.IndexState.SCANNING)
        self.put(info)
        return info

    async def remove(self, name: str) -> None:
        self.calls.append(("remove", name))
        self.infos = [info for info in self.infos if info.name != name]
        self._emit(ev.CollectionsChanged(tuple(self.infos)))

    async def reindex(self, name: str) -> None:
        self.calls.append(("reindex", name))

    def rescan(self) -> None:
        self.calls.append(("rescan", None))

    def window_shown(self) -> None:
        pass  # the main window came to the front: the real service may rescan

    def waiting_because(self) -> str:
        return "Paused" if self.held else ""

    def pause(self) -> None:
        self.calls.append(("pause", None))
        self.held = True
        self.infos = [dataclasses.replace(info, state=ev.IndexState.PAUSED) if info.state != ev.IndexState.IDLE
                      else info for info in self.infos]
        self._emit(ev.CollectionsChanged(tuple(self.infos)))

    def resume(self) -> None:
        self.calls.append(("resume", None))
        self.held = False
        self.infos = [dataclasses.replace(info, state=ev.IndexState.READING) if info.state == ev.IndexState.PAUSED
                      else info for info in self.infos]
        self._emit(ev.CollectionsChanged(tuple(self.infos)))

    def set_answering(self, busy: bool) -> None:
        self.calls.append(("set_answering", busy))

    def set_saving_power(self, saving: bool) -> None:
        self.calls.append(("set_saving_power", saving))

    def embedding_model(self) -> str | None:
        return self.chosen

    async def choose_embedding_model(self, model_id: str | None) -> None:
        self.calls.append(("choose_embedding_model", model_id))
        self.chosen = model_id

    async def search(self, question: str, names: Sequence[str], limit: int) -> list[object]:
        return []

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def put(self, info: ev.CollectionInfo) -> None:
        """Add or replace a collection and say so, as the service does."""
        self.infos = [shown for shown in self.infos if shown.name != info.name] + [info]
        self._emit(ev.CollectionsChanged(tuple(self.infos)))


def collection(name: str, folder: Path, state: ev.IndexState = ev.IndexState.IDLE, files: int = 3,
               unreadable: int = 0, last_indexed: float | None = None) -> ev.CollectionInfo:
    return ev.CollectionInfo(name=name, folder=folder, files=files, indexed=files - unreadable, unreadable=unreadable,
                             chunks=files * 4, vectors=0, last_indexed=last_indexed, state=state)
