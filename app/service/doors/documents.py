"""DocumentsDoor: the Documents window's collections, their indexing and files, and its embedding model."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.service.root import Service


class DocumentsDoor:
    """What the Documents window calls: the collections (CollectionsChanged, IndexingProgress and
    DocumentsProblem tell what becomes of them), a folder added, reindexed or removed, indexing
    paused and resumed and why it waits, a rescan for changed files, the embedding model chosen;
    and from the library, the models listed and an embedding model downloaded from the catalog."""

    def __init__(self, service: Service) -> None:
        documents, library = service.collections, service.library
        self.collections = documents.collections
        self.files = documents.files
        self.add_folder = documents.add_folder
        self.remove = documents.remove
        self.reindex = documents.reindex
        self.rescan = documents.rescan
        self.pause = documents.pause
        self.resume = documents.resume
        self.waiting_because = documents.waiting_because
        self.embedding_model = documents.embedding_model
        self.choose_embedding_model = documents.choose_embedding_model
        self.list_models = library.refresh
        self.download = library.download
