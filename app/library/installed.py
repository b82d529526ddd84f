"""InstalledModel: a model in the library as model.json records it, a value that never reads the disk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.library.model_defaults import ModelDefaults
from app.library.model_files.model_format import ModelFormat
from app.library.model_files.model_purpose import ModelPurpose

METADATA_VERSION = 1
# A model on a server the person added: no file, no format of the library's (app/library/servers/).
RemoteFormat = Literal["remote"]


@dataclass(frozen=True)
class InstalledModel:
    """A model in the library and what is known about it.

    format is decided once, when the model is added (or, for a model.json written before
    it was kept there, when the library is read), so views can show it without asking
    the disk on the UI thread.
    """

    id: str
    title: str
    path: Path
    size: int
    sha256: str | None
    source: str
    added: float
    format: ModelFormat | RemoteFormat
    referenced: bool = False     # True: the file stays where the user keeps it; remove only forgets it
    missing: bool = False        # a referenced file (or one part) is not there now (unplugged drive)
    files: tuple[Path, ...] = ()  # all files of a split GGUF (path is the first part); () otherwise
    defaults: ModelDefaults = ModelDefaults()
    # Decided from the header when the model is added: an embedding model is offered to
    # document search and kept out of every choice of a model to chat with.
    purpose: ModelPurpose = ModelPurpose.CHAT
    # The model's vision projector (an mmproj GGUF) the library paired with it; None: text only.
    projector: Path | None = None
    # A projector model.json names that is not there now (deleted, an unplugged drive): the
    # model is listed text only, its details say so, and model.json keeps the name.
    missing_projector: Path | None = None
    # A model on a server the person added (app/library/servers/chat_model.py): the address the engine's
    # remote backend loads ("remote://studio-pc/llama3.1:8b"). path then names no file: it is the server's
    # name and the model's, for what shows a path. "" for a model on this PC.
    address: str = ""
    # A remote model its server (or the person, by hand) says takes images: it has no projector here.
    sees_images: bool = False

    @property
    def location(self) -> str:
        """What the engine loads (Load.model_path): the address of a remote model, else the file's path."""
        return self.address or str(self.path)

    @property
    def remote(self) -> bool:
        return bool(self.address)

    @property
    def vision(self) -> bool:
        return self.projector is not None or self.sees_images

    @property
    def chats(self) -> bool:
        return self.purpose is ModelPurpose.CHAT

    def to_json(self) -> dict[str, Any]:
        """model.json: file names for a model in its folder, absolute paths for a referenced one."""
        def written(path: Path) -> str:
            return str(path) if self.referenced else path.name

        data: dict[str, Any] = {"id": self.id, "title": self.title, "path": written(self.path),
                                "size": self.size, "sha256": self.sha256, "source": self.source,
                                "added": self.added, "format": self.format, "purpose": self.purpose.value,
                                "version": METADATA_VERSION}
        if self.referenced:
            data["referenced"] = True
        if self.files:
            data["files"] = [written(part) for part in self.files]
        if self.projector is not None or self.missing_projector is not None:
            data["projector"] = written(self.projector or self.missing_projector or self.path)
        if self.defaults.to_dict():
            data["defaults"] = self.defaults.to_dict()
        return data
