"""`kestrel chat --attach FILE` and `--docs COLLECTION` as a user runs them: real processes, the reader's worker."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from app.cli.chat_documents import collection_search, fit_note, write_sources
from app.documents.reading import read_document
from app.service.documents.attached_files import read_attachments
from app.service.documents.document_context import Fit, Material, Source
from tests.cli.test_chat_cli import assert_no_traceback, json_lines, kestrel
from tests.helpers.doc_files import write_looping_pdf, write_pdf

FACT = "The kestrel club meets on Thursdays at 7 in room 12."
QUESTION = "When does the kestrel club meet?"


def club_file(folder: Path) -> Path:
    path = folder / "club notes.txt"
    path.write_text(f"Notes of the club.\n\n{FACT}\n", encoding="utf-8")
    return path


def filler(paragraphs: int) -> str:
    """Made-up paragraphs on other things, none about the club."""
    topics = ["harbour tides", "orchard pruning", "railway timetables", "glacier melt", "bread ovens"]
    return "\n\n".join(f"Paragraph {i} on {topics[i % len(topics)]}: the figures for week {i} were recorded "
                       f"by the survey team, checked twice and filed under shelf {i * 7 % 31}." for i in range(paragraphs))


def test_json_gives_a_sources_line_before_done(tiny_model: Path, tmp_path: Path) -> None:
    club = club_file(tmp_path)
    result = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "4", "--ctx", "512", "--json",
                     "--attach", str(club), QUESTION)
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stdout)
    assert [line["type"] for line in lines[-2:]] == ["sources", "done"]
    assert lines[-2]["fit"] == "whole"
    assert lines[-2]["sources"] == [{"n": 1, "path": str(club), "page": None, "heading": None,
                                     "text": f"Notes of the club.\n\n{FACT}"}]
    assert lines[-1]["prompt_tokens"] > 40, "the file went into the prompt"
    assert_no_traceback(result)


def test_plain_output_ends_with_the_sources(tiny_model: Path, tmp_path: Path) -> None:
    result = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "4", "--ctx", "512",
                     "--attach", str(club_file(tmp_path)), QUESTION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("\n\nSources:\n[1] club notes.txt\n")
    assert "too long" not in result.stderr


def test_a_file_past_the_context_is_said_and_its_passages_listed(tmp_path: Path) -> None:
    # On the printer's parts: the tiny model's tokenizer takes ~2.4 tokens for each one estimated
    # (real ones about 1), so its 2,048-token context cannot hold a retrieval's passages.
    big = tmp_path / "minutes.md"
    big.write_text(f"# Minutes\n\n{filler(250)}\n\n## Club\n\n{FACT}\n", encoding="utf-8")
    attachments = read_attachments([big], lambda paths: (read_document(path) for path in paths))
    material = Material((Source(1, str(big), None, "Minutes › Club", FACT),
                         Source(2, str(big), None, "Minutes", "…")), Fit.RETRIEVED)
    assert fit_note(material, attachments) == (
        "minutes.md is too long for the model's context with room for the answer, so the answer had the 2 "
        "passages that best match the question (a larger --ctx, where the model holds one, lets more in).")
    assert fit_note(Material(material.sources, Fit.WHOLE), attachments) is None
    out = io.StringIO()
    write_sources(out, material)
    assert out.getvalue() == "\nSources:\n[1] minutes.md › Minutes › Club\n[2] minutes.md › Minutes\n"


def test_save_keeps_the_attached_file_on_the_message_and_the_sources_on_the_answer(tiny_model: Path,
                                                                                   tmp_path: Path) -> None:
    from app.core.store.history import HistoryStore
    from app.core.paths import data_paths

    club = club_file(tmp_path)
    result = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "4", "--ctx", "512", "--save",
                     "--attach", str(club), QUESTION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("\n\nSources:\n[1] club notes.txt\n")
    store = HistoryStore(data_paths().history_db)
    try:
        (saved,) = store.list_conversations()
        user, answer = store.messages(saved.id)
    finally:
        store.close()
    assert user.text == QUESTION
    assert [(f.path, f.text) for f in user.attachments] == [(str(club), f"Notes of the club.\n\n{FACT}")]
    assert [(s.number, s.path) for s in answer.sources] == [(1, str(club))]


def test_unreadable_files_are_named_with_why_and_exit_3(tiny_model: Path, tmp_path: Path) -> None:
    looping = write_looping_pdf(tmp_path / "loop.pdf")
    result = kestrel("chat", "--model", str(tiny_model), "--json", "--attach", str(club_file(tmp_path)),
                     "--attach", str(looping), "--attach", str(tmp_path / "missing.md"), QUESTION)
    assert result.returncode == 3, result.stderr
    assert f"{looping} cannot be read:" in result.stderr and f"{tmp_path / 'missing.md'} cannot be read:" in result.stderr
    assert "club notes.txt" not in result.stderr
    (error,) = json_lines(result.stdout)
    assert error["type"] == "error" and error["status"] == 3
    assert_no_traceback(result)


def test_an_unknown_collection_is_bad_usage(tiny_model: Path, tmp_path: Path) -> None:
    result = kestrel("chat", "--model", str(tiny_model), "--docs", "papers", QUESTION)
    assert result.returncode == 2, result.stderr
    assert "There is no collection named 'papers'" in result.stderr and "kestrel docs add" in result.stderr
    folder = tmp_path / "notes"
    folder.mkdir()
    club_file(folder)
    assert kestrel("docs", "add", str(folder), "--name", "club").returncode == 0
    result = kestrel("chat", "--model", str(tiny_model), "--docs", "papers", QUESTION)
    assert result.returncode == 2, result.stderr
    assert "(the collections: club)" in result.stderr
    assert_no_traceback(result)


# --- on the real instruct model: the answer comes from the file ---------------------------


def _answer(result) -> tuple[str, list[dict]]:
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stdout)
    text = "".join(line["text"] for line in lines if line["type"] == "delta")
    sources = next(line["sources"] for line in lines if line["type"] == "sources")
    return text, sources


@pytest.mark.instruct
def test_the_instruct_model_answers_from_an_attached_file_listed_as_source_1(instruct_model: Path,
                                                                       tmp_path: Path) -> None:
    result = kestrel("chat", "--model", str(instruct_model), "--temperature", "0", "--max-tokens", "60",
                     "--ctx", "2048", "--json", "--attach", str(club_file(tmp_path)), QUESTION)
    text, sources = _answer(result)
    # The prompt asks for [1]; Qwen2.5 0.5B cites it on some wordings and not on others, so it is not asserted.
    assert "Thursday" in text and "7" in text, text
    assert [source["n"] for source in sources] == [1]


@pytest.mark.instruct
@pytest.mark.slow
def test_the_instruct_model_finds_the_fact_in_a_file_too_long_for_its_context(instruct_model: Path,
                                                                              tmp_path: Path) -> None:
    big = tmp_path / "minutes.md"
    big.write_text(f"# Minutes\n\n{filler(60)}\n\n## Club\n\n{FACT}\n\n{filler(60)}", encoding="utf-8")
    # A small context keeps the prompt short (each token costs on 2 cores) and the file ~5 times past it.
    result = kestrel("chat", "--model", str(instruct_model), "--temperature", "0", "--max-tokens", "40",
                     "--ctx", "1024", "--json", "--attach", str(big), QUESTION)
    text, sources = _answer(result)
    assert "Thursday" in text, text
    assert FACT in sources[0]["text"] and sources[0]["heading"] == "Minutes › Club"
    assert sum(len(source["text"]) for source in sources) < 1024 * 4, "passages, not the whole file"
    assert json_lines(result.stdout)[-2]["fit"] == "retrieved"


@pytest.mark.instruct
def test_the_instruct_model_answers_from_a_collection(instruct_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "survey.txt").write_text(filler(20), encoding="utf-8")
    write_pdf(folder / "club.pdf", [[("Other business", filler(3))], [("Meetings", FACT)]])
    assert kestrel("docs", "add", str(folder)).returncode == 0
    result = kestrel("chat", "--model", str(instruct_model), "--temperature", "0", "--max-tokens", "60",
                     "--ctx", "2048", "--json", "--docs", "papers", QUESTION)
    text, sources = _answer(result)
    assert "Thursday" in text, text
    assert (sources[0]["path"], sources[0]["page"]) == (str(folder / "club.pdf"), 2), json.dumps(sources)


def test_a_collection_with_vectors_is_searched_by_meaning_too(tiny_model: Path, tmp_path: Path) -> None:
    """With an embedding model installed and the collection's vectors made, `chat --docs` fuses both
    rankings: a passage that shares no word with the question comes with the one that does."""
    from tests.helpers.embedding_gguf import build_embedding_gguf

    folder = tmp_path / "papers"
    folder.mkdir()
    club_file(folder)
    (folder / "tides.txt").write_text(filler(1), encoding="utf-8")
    assert kestrel("docs", "add", str(folder), "--name", "papers").returncode == 0
    keyword = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "2", "--ctx", "1024", "--json",
                      "--docs", "papers", QUESTION)
    assert keyword.returncode == 0, keyword.stderr
    assert "by keyword and meaning" not in keyword.stderr
    assert [Path(s["path"]).name for s in _sources(keyword)] == ["club notes.txt"]
    assert kestrel("models", "add", str(build_embedding_gguf(tmp_path / "tiny-embed.gguf"))).returncode == 0
    assert kestrel("docs", "embed").returncode == 0
    both = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "2", "--ctx", "1024", "--json",
                   "--docs", "papers", QUESTION)
    assert both.returncode == 0, both.stderr
    assert "Searched by keyword and meaning (kestrel-tiny-embed)" in both.stderr
    assert sorted(Path(s["path"]).name for s in _sources(both)) == ["club notes.txt", "tides.txt"]
    assert_no_traceback(both)


class _Embedder:
    """Every query is the club's direction; fails on request, as a crashed embedding process does."""

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.asked = fail, 0

    def embed(self, texts):
        self.asked += 1
        if self.fail:
            from app.documents.embedding import EmbeddingError
            raise EmbeddingError("The embedding model stopped.")
        return [[1.0, 0.0] for _ in texts]


@pytest.mark.parametrize("fail", [False, True])
def test_the_chats_search_is_by_meaning_given_vectors_and_by_keyword_when_they_fail(
        tmp_path: Path, fail: bool, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    from app.documents.chunks import chunk_document
    from app.documents.index import DocumentIndex
    from app.documents.search import VectorQuery

    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "club.txt").write_text(FACT, encoding="utf-8")
    (folder / "survey.txt").write_text("Which day the survey team met is not recorded.", encoding="utf-8")
    index = DocumentIndex(tmp_path / "documents.sqlite3", lambda paths: (read_document(p) for p in paths),
                          chunk_document)
    try:
        index.add_collection(folder, "papers")
        index.index("papers")
        chunks = {text: chunk_id for chunk_id, text in index.chunks_without_vectors("m")}
        other = next(t for t in chunks if t != FACT)
        index.store_vectors("m", [(chunks[FACT], [1.0, 0.0]), (chunks[other], [0.0, 1.0])])
        embedder = _Embedder(fail)
        search = collection_search(index, VectorQuery("m", embedder))
        hits = asyncio.run(search("Which day is the gathering?", ["papers"], 8))  # no word of the club's line
    finally:
        index.close()
    assert embedder.asked == 1
    if fail:
        assert capsys.readouterr().err == ("kestrel: The embedding model stopped. The collections were searched by "
                                           "keyword only for this answer.\n")
        assert [hit.path.name for hit in hits] == ["survey.txt"]
    else:
        # Only its vector finds the club's line: the question shares none of its words.
        assert {hit.path.name for hit in hits} == {"survey.txt", "club.txt"}


def _sources(result) -> list[dict]:
    return next(line for line in json_lines(result.stdout) if line["type"] == "sources")["sources"]
