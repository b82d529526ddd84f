"""`kestrel docs` as a user runs it: add, list, search, reindex and remove, with the reader's real
worker process; every mistake in plain words with its exit status, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
from pathlib import Path

from app.__main__ import main
from app.documents.index import default_database


def docs(*args: str) -> subprocess.CompletedProcess:
    """`kestrel docs ARGS` in this process, its output captured as a subprocess's would be."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["docs", *args])
        except SystemExit as exit:  # argparse's own usage errors
            status = int(exit.code or 0)
    result = subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "My Notes"
    (folder / "trips").mkdir(parents=True)
    (folder / "trips" / "iceland.md").write_text("# Iceland\n\nWe saw puffins at Látrabjarg.\n", encoding="utf-8")
    (folder / "recipes.txt").write_text("Bake the bread for forty minutes.\n", encoding="utf-8")
    (folder / "broken.txt").write_bytes(b"\x00\x01\x02\xff" * 100)
    return folder


def test_add_list_search_reindex_remove(tmp_path: Path) -> None:
    folder = notes(tmp_path)
    added = docs("add", str(folder), "--name", "notes")
    assert added.returncode == 0, added.stderr
    assert re.fullmatch(r"notes: 3 files, \d+ chunks \(3 new, 0 changed, 0 gone\)\. 1 could not be read: "
                        r"kestrel docs list notes --files says why\.\n", added.stdout), added.stdout
    assert default_database().is_file()
    listed = docs("list")
    assert listed.returncode == 0 and listed.stdout.startswith("notes  ")
    assert re.search(r"  3 files, \d+ chunks, 1 unreadable; indexed 20\d\d-", listed.stdout), listed.stdout
    [row] = [json.loads(line) for line in docs("list", "--json").stdout.splitlines()]
    assert (row["name"], row["folder"], row["files"], row["unreadable"]) == ("notes", str(folder.resolve()), 3, 1)
    files = docs("list", "notes", "--files").stdout
    assert "broken.txt  unreadable: " in files and "recipes.txt  1 chunk\n" in files
    found = docs("search", "puffins", "--json")
    assert found.returncode == 0, found.stderr
    [hit] = [json.loads(line) for line in found.stdout.splitlines()]
    assert hit["path"] == str(folder.resolve() / "trips" / "iceland.md") and "puffins" in hit["text"]
    assert set(hit) == {"collection", "path", "page", "heading", "score", "text", "chunk_id"}
    plain = docs("search", "bread", "--collection", "NOTES")
    assert plain.stdout.startswith("1. recipes.txt") and "Bake the bread" in plain.stdout
    (folder / "recipes.txt").unlink()
    reindexed = docs("reindex", "notes")
    assert reindexed.returncode == 0 and "(0 new, 0 changed, 1 gone)" in reindexed.stdout
    assert docs("search", "bread").stdout == ""
    removed = docs("remove", "notes")
    assert removed.returncode == 0 and "was not touched" in removed.stdout
    assert (folder / "trips" / "iceland.md").exists() and docs("list", "--json").stdout == ""


def test_mistakes_are_said_in_plain_words(tmp_path: Path) -> None:
    missing = docs("add", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "nowhere does not exist" in missing.stderr
    empty = docs("search", "anything")
    assert empty.returncode == 0 and "No collections yet" in empty.stderr
    folder = notes(tmp_path)
    assert docs("add", str(folder)).returncode == 0
    again = docs("add", str(folder))
    assert again.returncode == 2 and "already the collection 'My Notes'" in again.stderr
    unknown = docs("search", "x", "--collection", "work")
    assert unknown.returncode == 2 and "no collection named 'work' (the collections: My Notes)" in unknown.stderr
    assert docs("remove", "work").returncode == 2 and docs("reindex", "work").returncode == 2
    limit = docs("search", "x", "--limit", "0")
    assert limit.returncode == 2 and "--limit 0 is not allowed" in limit.stderr
    blank = docs("search", "  ")
    assert blank.returncode == 2 and "The search is empty" in blank.stderr
    assert docs("search", 'NEAR("x" AND *').returncode == 0
    usage = docs("frobnicate")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


def test_a_damaged_index_is_a_files_problem(tmp_path: Path) -> None:
    default_database().parent.mkdir(parents=True, exist_ok=True)
    default_database().write_bytes(b"not sqlite at all" * 200)
    listed = docs("list")
    assert listed.returncode == 7 and "delete the file and add the folders again" in listed.stderr


def kestrel(*args: str) -> subprocess.CompletedProcess:
    """`kestrel ARGS` in this process (models add, models default), captured as docs() is."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())


def test_an_embedding_model_fills_vectors_and_makes_search_hybrid(tmp_path: Path, tiny_model: Path) -> None:
    from tests.helpers.embedding_gguf import build_embedding_gguf

    folder = notes(tmp_path)
    added = docs("add", str(folder), "--name", "notes")
    assert added.returncode == 0 and "Keyword search only: no embedding model is installed." in added.stderr
    keyword = docs("search", "bread")
    assert keyword.stdout.startswith("1. recipes.txt")
    assert keyword.stderr == ("Keyword search only: no embedding model is installed. To search by meaning too, get "
                              "one with: kestrel models get all-minilm-l6-v2-q8_0 (25 MB)\n")
    assert "score" not in keyword.stdout and "e-0" not in keyword.stdout
    nothing = docs("embed")
    assert nothing.returncode == 3 and nothing.stderr.startswith("kestrel: No vectors can be made: no embedding")
    assert kestrel("models", "add", str(tiny_model)).returncode == 0
    assert kestrel("models", "add", str(build_embedding_gguf(tmp_path / "tiny-embed.gguf"))).returncode == 0
    assert docs("model").stdout == "tiny-embed (the only one installed)\n"
    chat_model = docs("model", "tiny-model")
    assert chat_model.returncode == 3 and "tiny-model is not an embedding model" in chat_model.stderr
    refused = kestrel("models", "default", "tiny-embed")
    assert refused.returncode == 3 and "tiny-embed is an embedding model" in refused.stderr
    assert "(embedding model: not for chat)" in kestrel("models", "list").stdout
    waiting = docs("search", "bread")
    assert "no vectors from kestrel-tiny-embed yet. Make them with: kestrel docs embed" in waiting.stderr
    embedded = docs("embed", "notes")
    assert embedded.returncode == 0 and embedded.stdout == "Embedded 2 chunks with kestrel-tiny-embed.\n"
    assert docs("embed").stdout == "Every chunk already has vectors from kestrel-tiny-embed.\n"
    hybrid = docs("search", "bread", "--json")
    assert hybrid.returncode == 0 and hybrid.stderr == ""
    # Fused by rank: the keyword hit and the other chunk, found by its vector alone.
    hits = [json.loads(line) for line in hybrid.stdout.splitlines()]
    assert [Path(hit["path"]).name for hit in hits] == ["recipes.txt", "iceland.md"]
    assert docs("search", "bread").stderr == "Searched by keyword and meaning (kestrel-tiny-embed).\n"
    (folder / "more.txt").write_text("The ferry leaves at noon.\n", encoding="utf-8")
    reindexed = docs("reindex", "notes")
    assert reindexed.returncode == 0 and reindexed.stdout.endswith("Embedded 1 chunk with kestrel-tiny-embed.\n")


def test_the_hint_for_search_by_meaning_names_a_catalog_embedding_model_and_its_size() -> None:
    from app.cli.docs_vectors import NO_MODEL
    from app.library.catalog import load_catalog

    entry = next(entry for entry in load_catalog() if entry.id == "all-minilm-l6-v2-q8_0")
    assert f"kestrel models get {entry.id} " in NO_MODEL
    assert f"({round(sum(file.size for file in entry.files) / 1e6)} MB)" in NO_MODEL
