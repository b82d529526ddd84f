"""`kestrel docs`: add folders as collections, list, remove and reindex them, and search them."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.user_error import EXIT_INTERRUPTED, EXIT_MODEL, EXIT_OK, EXIT_USAGE, UserError
from app.cli.closed_output import output_closed
from app.cli.docs_vectors import Vectors, choose, current_choice, fill, search_note
from app.cli.models.models_common import EXIT_FILES, ProgressLine
from app.cli.terminal_text import disk_failure, shown_path, terminal_line, terminal_text
from app.documents.collections import Collection, DocumentsError, FileState, Hit, IndexOutcome, IndexProgress, \
    IndexUnavailable
from app.documents.readers import all_formats, formats_in_words
from app.documents.scan import SKIPPED_FOLDERS
from app.documents.values import source_label
from app.library.model_files.gguf_info import ModelFileError

if TYPE_CHECKING:  # the index brings numpy: imported only when a docs command runs
    from app.documents.index import DocumentIndex

_MAX_LIMIT = 1000
_SHOWN_CHARS = 300  # of a hit's text in the plain listing; --json gives it whole
_REDRAW_S = 0.1


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    docs = commands.add_parser("docs", help="add folders of documents as collections and search them")
    actions = docs.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help=f"add a folder as a collection and index its documents ({formats_in_words()}) "
                                         "before returning", description=_formats_read())
    add.add_argument("folder", metavar="FOLDER", type=Path)
    add.add_argument("--name", help="the collection's name (default: the folder's name)")
    add.set_defaults(run=run, handler=_add)
    listing = actions.add_parser("list", help="the collections: files, chunks, unreadable files, last indexed")
    listing.add_argument("name", metavar="NAME", nargs="?", help="only this collection")
    listing.add_argument("--files", action="store_true", help="list each file, and why one could not be read")
    listing.add_argument("--json", action="store_true", help="one JSON object per collection (or file) and line")
    listing.set_defaults(run=run, handler=_list)
    remove = actions.add_parser("remove", help="remove a collection from the index (its folder is not touched)")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(run=run, handler=_remove)
    reindex = actions.add_parser("reindex", help="read what changed in a collection's folder (default: all)")
    reindex.add_argument("name", metavar="NAME", nargs="?")
    reindex.set_defaults(run=run, handler=_reindex)
    embed = actions.add_parser("embed", help="make the vectors a collection's chunks lack (default: all), "
                                             "for search by meaning")
    embed.add_argument("name", metavar="NAME", nargs="?")
    embed.set_defaults(run=run, handler=_embed)
    model = actions.add_parser("model", help="the embedding model the documents use: show it, or choose one")
    model.add_argument("model", metavar="ID", nargs="?", help="an installed embedding model's id (see models list)")
    model.set_defaults(run=run, handler=_model)
    search = actions.add_parser("search", help="search the collections' documents (by keyword, and by meaning "
                                               "once an embedding model has made their vectors)")
    search.add_argument("query", metavar="QUERY")
    search.add_argument("--collection", action="append", metavar="N", help="search only this collection (repeatable)")
    search.add_argument("--limit", type=int, default=10, metavar="K", help="how many hits (default 10)")
    search.add_argument("--json", action="store_true", help="one JSON object per hit and line")
    search.set_defaults(run=run, handler=_search)


def _formats_read() -> str:
    """Which files of a folder are read, format by format, with the names it takes them by."""
    formats = "; ".join(f"{document.name} ({', '.join(document.extensions + document.file_names)})"
                        for document in all_formats())
    skipped = sorted(SKIPPED_FOLDERS)
    return (f"Kestrel reads these files in the folder and its subfolders: {formats}. Hidden files and folders are "
            f"left out, and so are the folders {', '.join(skipped[:-1])} and {skipped[-1]}.")


def run(args: argparse.Namespace) -> int:
    """Run the chosen action; a problem the user can fix becomes its message and exit status."""
    try:
        status: int = args.handler(args)
        return status
    except UserError as exc:
        print(f"kestrel: {terminal_text(str(exc))}", file=sys.stderr, flush=True)
        return exc.status
    except IndexUnavailable as exc:
        print(f"kestrel: {terminal_text(str(exc))}", file=sys.stderr, flush=True)
        return EXIT_FILES
    except ModelFileError as exc:
        print(f"kestrel: {terminal_text(exc.message)}", file=sys.stderr, flush=True)
        return EXIT_MODEL
    except DocumentsError as exc:
        print(f"kestrel: {terminal_text(str(exc))}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except OSError as exc:
        if output_closed(exc):
            raise
        print(f"kestrel: {disk_failure(exc, 'use', 'the documents index')}", file=sys.stderr, flush=True)
        return EXIT_FILES


def open_index() -> DocumentIndex:
    """The index in the data folder, reading files in the reader's worker process."""
    from app.documents.chunks import chunk_document
    from app.documents.index import DocumentIndex, default_database
    from app.documents.reader_worker import read_in_worker

    return DocumentIndex(default_database(), read_in_worker, chunk_document)


# --- add, reindex, remove -----------------------------------------------------------

def _add(args: argparse.Namespace) -> int:
    with open_index() as index:
        collection = index.add_collection(args.folder, args.name)
        print(f"Added {terminal_line(collection.name)} ({shown_path(collection.folder)}); reading its documents…",
              file=sys.stderr, flush=True)
        _index_one(index, collection.name)
        _fill_vectors(index, [collection.name])
    return EXIT_OK


def _reindex(args: argparse.Namespace) -> int:
    with open_index() as index:
        names = [index.collection(args.name).name] if args.name else [c.name for c in index.collections()]
        if not names:
            print("No collections yet. Add a folder with: kestrel docs add FOLDER", file=sys.stderr)
        for name in names:
            _index_one(index, name)
        if names:
            _fill_vectors(index, None if args.name is None else names)
    return EXIT_OK


def _embed(args: argparse.Namespace) -> int:
    with open_index() as index:
        names = None if args.name is None else [index.collection(args.name).name]
        if not index.collections():
            print("No collections yet. Add a folder with: kestrel docs add FOLDER", file=sys.stderr)
            return EXIT_OK
        choice = current_choice()
        if choice.model is None:
            raise UserError(choice.why_none.replace("Keyword search only: ", "No vectors can be made: ", 1),
                            EXIT_MODEL)
        if not fill(index, choice.model, names):
            print(f"Every chunk already has vectors from {terminal_line(choice.model.title)}.")
    return EXIT_OK


def _model(args: argparse.Namespace) -> int:
    print(choose(args.model))
    return EXIT_OK


def _fill_vectors(index: DocumentIndex, names: list[str] | None) -> None:
    """After reading: the chosen embedding model's vectors for the new chunks, or say search stays by keyword."""
    choice = current_choice()
    if choice.model is None:
        print(choice.why_none, file=sys.stderr)
        return
    fill(index, choice.model, names)


def _remove(args: argparse.Namespace) -> int:
    with open_index() as index:
        collection = index.collection(args.name)
        index.remove_collection(collection.name)
    print(f"Removed the collection {terminal_line(collection.name)} from the index; "
          f"{shown_path(collection.folder)} was not touched.")
    return EXIT_OK


def _index_one(index: DocumentIndex, name: str) -> None:
    """Index a collection with a progress line; Ctrl+C keeps what was read for the next run."""
    line = ProgressLine(sys.stderr)
    try:
        outcome = index.index(name, _progress_shower(line))
    except KeyboardInterrupt:
        line.end()
        raise UserError(f"Interrupted. The files read so far are kept; kestrel docs reindex {name} goes on "
                        "with the rest.", EXIT_INTERRUPTED) from None
    line.end()
    print(_summary(outcome, index.collection(name)))


def _progress_shower(line: ProgressLine) -> Callable[[IndexProgress], None]:
    shown = [0.0]

    def show(progress: IndexProgress) -> None:
        last = progress.files_done == progress.files_total
        if not last and time.monotonic() - shown[0] < _REDRAW_S:
            return
        shown[0] = time.monotonic()
        left = "" if progress.seconds_left is None else f", about {_duration(progress.seconds_left)} left"
        line.show(f"Indexing {terminal_line(progress.collection)}: {progress.files_done:,}/{progress.files_total:,} "
                  f"files{left}")

    return show


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _count(number: int, word: str) -> str:
    return f"{number:,} {word}{'' if number == 1 else 's'}"


def _summary(outcome: IndexOutcome, collection: Collection) -> str:
    changes = f"{outcome.added:,} new, {outcome.changed:,} changed, {outcome.removed:,} gone"
    text = (f"{terminal_line(collection.name)}: {_count(collection.files, 'file')}, "
            f"{_count(collection.chunks, 'chunk')} ({changes}).")
    if collection.unreadable:
        text += (f" {collection.unreadable:,} could not be read: kestrel docs list "
                 f"{terminal_line(collection.name)} --files says why.")
    return text


# --- list ---------------------------------------------------------------------------

def _list(args: argparse.Namespace) -> int:
    with open_index() as index:
        collections = [index.collection(args.name)] if args.name else index.collections()
        if not collections and not args.json:
            print("No collections yet. Add a folder with: kestrel docs add FOLDER", file=sys.stderr)
        for collection in collections:
            if args.files:
                _print_files(index, collection, args.json)
            elif args.json:
                print(json.dumps({"name": collection.name, "folder": str(collection.folder), "files": collection.files,
                                  "chunks": collection.chunks, "unreadable": collection.unreadable,
                                  "pending": collection.pending, "indexed_at": collection.indexed_at},
                                 ensure_ascii=False))
            else:
                print(_collection_line(collection))
    return EXIT_OK


def _collection_line(collection: Collection) -> str:
    when = ("never completed" if collection.indexed_at is None
            else time.strftime("%Y-%m-%d %H:%M", time.localtime(collection.indexed_at)))
    pending = f", {collection.pending:,} not yet read" if collection.pending else ""
    return (f"{terminal_line(collection.name)}  {shown_path(collection.folder)}  {_count(collection.files, 'file')}, "
            f"{_count(collection.chunks, 'chunk')}, {collection.unreadable:,} unreadable{pending}; indexed {when}")


def _print_files(index: DocumentIndex, collection: Collection, as_json: bool) -> None:
    for record in index.files(collection.name):
        if as_json:
            print(json.dumps({"collection": collection.name, "path": str(record.path), "state": record.state.value,
                              "reason": record.reason, "chunks": record.chunks, "size": record.size},
                             ensure_ascii=False))
            continue
        why = f": {terminal_line(record.reason)}" if record.reason else ""
        chunks = _count(record.chunks, "chunk") if record.state is FileState.INDEXED else record.state.value
        print(f"{shown_path(record.path)}  {chunks}{why}")


# --- search -------------------------------------------------------------------------

def _hybrid_or_keyword(index: DocumentIndex, query: str, names: list[str] | None, limit: int,
                       vectors: Vectors | None) -> list[Hit]:
    """Hybrid when vectors can be had; an embedding model that fails leaves keyword search, said plainly."""
    from app.documents.embedding import EmbeddingError

    if vectors is None:
        return index.search(query, names, limit)
    try:
        return index.search(query, names, limit, vectors=vectors.query())
    except EmbeddingError as exc:
        print(f"kestrel: {terminal_text(str(exc))} Searched by keyword only.", file=sys.stderr, flush=True)
        return index.search(query, names, limit)


def _search(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= _MAX_LIMIT:
        raise UserError(f"--limit {args.limit} is not allowed: give how many hits to show, 1 to {_MAX_LIMIT}.",
                        EXIT_USAGE)
    if not args.query.strip():
        raise UserError("The search is empty: give the words to look for, e.g. kestrel docs search \"tax return\".",
                        EXIT_USAGE)
    with open_index() as index:
        if not index.collections():
            print("No collections yet. Add a folder with: kestrel docs add FOLDER", file=sys.stderr)
            return EXIT_OK
        names = None if args.collection is None else [index.collection(name).name for name in args.collection]
        choice = current_choice()
        with contextlib.ExitStack() as stack:
            vectors = None if choice.model is None else stack.enter_context(Vectors(choice.model))
            note = search_note(index, choice, vectors, names)
            if not args.json or vectors is None or note.startswith("Keyword"):
                print(note, file=sys.stderr)
            hits = _hybrid_or_keyword(index, args.query, names, args.limit, vectors)
    if not hits and not args.json:
        print("Nothing found.", file=sys.stderr)
    for number, hit in enumerate(hits, start=1):
        if args.json:
            print(json.dumps({"collection": hit.collection, "path": str(hit.path), "page": hit.page,
                              "heading": hit.heading, "score": hit.score, "text": hit.text, "chunk_id": hit.chunk_id},
                             ensure_ascii=False))
            continue
        text = " ".join(hit.text.split())
        text = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 1] + "…"
        # Best first: the rank says it. A raw score ("1.99e-06", a fused rank's sum) means nothing to a reader
        # and is not comparable across searches; --json keeps it for programs.
        print(f"{number}. {terminal_line(source_label(hit.path, hit.page, hit.heading))}  ({shown_path(hit.path)})")
        print(f"   {terminal_line(text)}")
    return EXIT_OK
