"""Vectors for `kestrel docs`: which embedding model the documents use, filling its vectors, and what search says."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.cli.user_error import EXIT_INTERRUPTED, EXIT_MODEL, EXIT_USAGE, UserError
from app.cli.models.models_common import ProgressLine, load_settings, open_library
from app.cli.terminal_text import terminal_line
from app.core.settings import Settings, SettingsError
from app.library.installed import InstalledModel
from app.library.model_files.model_purpose import ModelPurpose
from app.library.models import ModelLibrary

if TYPE_CHECKING:  # numpy and the child process: imported only when vectors are used
    from app.documents.index import DocumentIndex
    from app.documents.search import VectorQuery

# The catalog's embedding model: one command gets it (25 MB), where `models add PATH` asked for a file first.
NO_MODEL = ("Keyword search only: no embedding model is installed. To search by meaning too, get one with: "
            "kestrel models get all-minilm-l6-v2-q8_0 (25 MB)")


@dataclass(frozen=True)
class EmbeddingChoice:
    """The embedding model the documents use, or None with why (a sentence for the user)."""

    model: InstalledModel | None
    why_none: str = NO_MODEL


def embedding_choice(library: ModelLibrary, settings: Settings) -> EmbeddingChoice:
    """The model settings name, else the only (or oldest) embedding model installed
    (ModelLibrary.embedding_model); when the one named cannot be used, why."""
    chosen = settings.embedding_model
    model = library.embedding_model(chosen)
    if model is not None or not chosen:
        return EmbeddingChoice(model)
    found = library.find(chosen)
    if found is None or found.purpose is not ModelPurpose.EMBEDDING:
        return EmbeddingChoice(None, f"Keyword search only: the embedding model chosen for documents, "
                                     f"{terminal_line(chosen)}, is not installed. Choose another with "
                                     "kestrel docs model ID.")
    return EmbeddingChoice(None, f"Keyword search only: the embedding model {found.id} is not at "
                                 f"{found.path} now. Plug in its drive, or choose another with "
                                 "kestrel docs model ID.")


def current_choice() -> EmbeddingChoice:
    _, settings = load_settings()
    return embedding_choice(open_library(), settings)


class Vectors:
    """One embedding model for one command: its vector id (read in this process, so a search
    over a collection without its vectors never starts the child) and its child process."""

    def __init__(self, model: InstalledModel) -> None:
        from app.documents.embed_worker import model_id_of
        from app.documents.embedding import EmbeddingProcess
        from app.library.model_files.gguf_info import read_gguf_info

        self.model = model
        self.model_id = model_id_of(model.path, read_gguf_info(model.path).name)
        self.process = EmbeddingProcess(model.path)

    def query(self) -> VectorQuery:
        from app.documents.search import VectorQuery

        return VectorQuery(self.model_id, self.process)

    def close(self) -> None:
        self.process.close()

    def __enter__(self) -> Vectors:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def fill(index: DocumentIndex, model: InstalledModel, collections: Sequence[str] | None) -> int:
    """Embed the chunks the model has no vectors for, with a progress line; the count done.

    Each batch is stored as it comes, so Ctrl+C or a crash of the model keeps what was done."""
    from app.documents.embedding import EmbeddingError

    line = ProgressLine(sys.stderr)
    with Vectors(model) as vectors:
        done, total = index.vector_coverage(vectors.model_id, collections)
        missing = total - done
        if not missing:
            return 0
        line.show(f"Embedding 0/{missing:,} chunks…")
        try:
            count = index.embed_missing(vectors.model_id, vectors.process, collections=collections,
                                        on_progress=lambda n: line.show(f"Embedding {n:,}/{missing:,} chunks…"))
        except KeyboardInterrupt:
            line.end()
            raise UserError("Interrupted. The vectors made so far are kept; kestrel docs embed goes on with "
                            "the rest.", EXIT_INTERRUPTED) from None
        except EmbeddingError as exc:
            line.end()
            raise UserError(f"{exc} The documents are indexed and found by keyword meanwhile; "
                            "kestrel docs embed tries again.", EXIT_MODEL) from None
        line.end()
    print(f"Embedded {count:,} {'chunk' if count == 1 else 'chunks'} with {terminal_line(model.title)}.")
    return count


def search_note(index: DocumentIndex, choice: EmbeddingChoice, vectors: Vectors | None,
                collections: Sequence[str] | None) -> str:
    """Which search runs, in words: keyword only (and why) or keyword and meaning."""
    if vectors is None:
        return choice.why_none
    done, total = index.vector_coverage(vectors.model_id, collections)
    name = terminal_line(vectors.model.title)
    if not done:
        return (f"Keyword search only: the documents have no vectors from {name} yet. "
                "Make them with: kestrel docs embed")
    if done < total:
        return (f"Searched by keyword and meaning ({name}); {total - done:,} of {total:,} chunks have no "
                "vectors yet and are found by keyword only: kestrel docs embed makes them.")
    return f"Searched by keyword and meaning ({name})."


def choose(given: str | None) -> str:
    """`docs model [ID]`: say which embedding model the documents use, or choose one."""
    settings_file, settings = load_settings()
    library = open_library()
    if given is None:
        choice = embedding_choice(library, settings)
        if choice.model is None:
            return choice.why_none
        if settings.embedding_model:
            return f"{choice.model.id} (chosen)"
        if len(library.embedding_models()) == 1:
            return f"{choice.model.id} (the only one installed)"
        return f"{choice.model.id} (the oldest installed; choose one with kestrel docs model ID)"
    found = library.find(given)
    if found is None:
        raise UserError(f'No installed model has the id "{given}". Run kestrel models list to see the ids.',
                        EXIT_MODEL)
    if found.purpose is not ModelPurpose.EMBEDDING:
        raise UserError(f"{found.id} is not an embedding model: it cannot turn documents into vectors. "
                        "Choose one that kestrel models list marks as an embedding model.", EXIT_MODEL)
    try:
        settings_file.save(dataclasses.replace(settings, embedding_model=found.id))
    except SettingsError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    return (f'{found.id} ("{terminal_line(found.title)}") now makes the documents\' vectors. '
            "Make them for the collections with: kestrel docs embed")
