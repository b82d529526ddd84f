"""AttachDoor: files, images and document collections for the open chat's next message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.service.documents.attached_files import read_in_worker_off_loop
from app.service.documents.attached_images import read_image_data, read_images
from app.service.library.remote_servers import answers_from

if TYPE_CHECKING:
    from app.service.root import Service


class AttachDoor:
    """What the window's paperclip, Add image and Documents button call, and the CLI's `chat`
    with --file and --collection.

    Files are read in the document reader's worker and images checked in the image check's,
    off the loop (AttachmentsUnreadable and ImagesUnreadable name each one refused). `vision()`
    says whether the open chat's model can see images (cheap: ask again on ModelStateChanged,
    ConversationOpened, ConversationModelChosen); `answers_from()`, as cheaply, where the open chat's
    message goes when its model is on a server ("studio-pc (http://…)"; None: this PC). The open chat's collections are kept for a
    new chat until its first message. `use_search` and `sources` are the CLI's: it searches its
    own index and prints the sources an answer used.
    """

    def __init__(self, service: Service) -> None:
        self._collections = service.collections
        self.read_attachments = read_in_worker_off_loop
        self.read_images = read_images
        self.read_image_data = read_image_data
        self.vision = service.sight.state
        sight = service.sight
        self.answers_from = lambda: answers_from(sight.model())
        self.chat_collections = service.collection_choice.names
        self.set_chat_collections = service.collection_choice.choose
        self.use_search = service.documents.use_search
        self.sources = service.documents.used

    def collection_names(self) -> tuple[str, ...]:
        """The names of every collection, as last known (no I/O)."""
        return tuple(info.name for info in self._collections.collections())
