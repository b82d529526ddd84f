"""`models search`, `models files` and `models get REPO@QUANT` as a user runs them: real
processes against a hub served on 127.0.0.1 (HF_ENDPOINT), with the constructed search answer
of tests/fixtures/hub."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from app.cli.models.models_search import ROUGH_NOTE
from app.core.paths import data_paths
from tests.cli.test_models_get_cli import in_models_folder, models
from tests.helpers.http_servers import Served, TestServer, hugging_face_repo
from tests.helpers.hub_answers import EMPTY_ANSWER, RECORDED_ANSWER, serve_search
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.service.test_hub_search import list_sizes

REPO = "someone/Thinker-GGUF"


def test_search_prints_the_repositories_most_downloaded_first(server: TestServer,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = serve_search(server, "thinker", limit=5)
    monkeypatch.setenv("HF_ENDPOINT", server.base)

    result = models("search", "thinker", "--limit", "5")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["REPOSITORY", "DOWNLOADS", "LIKES", "UPDATED"]
    assert lines[1].split() == [REPO, "48,210", "312", "2026-09-19"]
    assert lines[2].split()[0] == "someone-else/Thinker-Coder-GGUF"
    assert lines[3].startswith("someone/Thinker-Large-GGUF") and lines[3].endswith("(gated: download it in a browser)")
    assert f"kestrel models files {REPO}" in result.stdout
    assert [(e.method, e.path) for e in server.log] == [("GET", path)], "one request, the one the user asked for"


def test_search_as_json_and_with_no_match(server: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    serve_search(server, "thinker")
    serve_search(server, "no such model", EMPTY_ANSWER)
    monkeypatch.setenv("HF_ENDPOINT", server.base)

    as_json = models("search", "thinker", "--json")
    nothing = models("search", "no such model")

    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r["id"] for r in rows][0] == REPO and rows[0]["downloads"] == 48210 and rows[2]["gated"] is True
    assert nothing.returncode == 0 and nothing.stdout == ""
    assert 'No GGUF models match "no such model" on Hugging Face.' in nothing.stderr


def test_search_when_the_hub_cannot_be_reached_says_so_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")

    result = models("search", "thinker")

    assert result.returncode == 7 and result.stdout == ""
    assert result.stderr.startswith("kestrel: Could not reach 127.0.0.1:9:")


def test_files_lists_quantizations_sizes_and_fit_and_get_picks_one_by_quantization(
        server: TestServer, storage: TestServer, tiny_model: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    body = tiny_model.read_bytes()
    # A second whole model that is larger (a longer name in its header): a download stops at the first byte
    # past the end a GGUF header gives, so bytes added after a model would not be a model any more.
    larger = build_tiny_gguf(tmp_path / "q8.gguf", name="kestrel-tiny-" + "q8" * 600).read_bytes()
    monkeypatch.setenv("HF_ENDPOINT", hugging_face_repo(server, storage, REPO, {
        "thinker-Q4_K_M.gguf": body, "thinker-Q8_0.gguf": larger, "README.md": b"# card"}))

    files = models("files", REPO)
    as_json = models("files", REPO, "--json")
    wrong = models("get", f"{REPO}@Q2_K")
    both = models("get", f"{REPO}@Q8_0", "--file", "thinker-Q8_0.gguf")

    assert files.returncode == 0, files.stderr
    first, second = files.stdout.splitlines()[:2]
    assert first.split()[0] == "Q4_K_M" and first.split()[-1] == "thinker-Q4_K_M.gguf" and "runs well" in first
    assert second.split()[0] == "Q8_0"
    assert f"kestrel models get {REPO}@Q4_K_M" in files.stdout
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["quantization"], r["size"]) for r in rows] == [("Q4_K_M", len(body)), ("Q8_0", len(larger))]
    assert len(larger) > len(body)
    assert rows[0]["verdict"] == "runs_well" and "Estimated from the file size" in rows[0]["reason"]
    assert rows[0]["tokens_per_s"] > 100 and rows[0]["speed_measured"] is False, "a tiny file decodes at once"
    assert " runs well: about " in first and " tokens/s here (estimated) " in first
    assert ROUGH_NOTE in files.stdout
    assert wrong.returncode == 2 and f"{REPO} offers no Q2_K file. It offers: Q4_K_M, Q8_0." in wrong.stderr
    assert both.returncode == 2 and "not both" in both.stderr
    assert in_models_folder() == []

    got = models("get", f"{REPO}@q8_0")

    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "thinker-Q8_0" and in_models_folder() == ["thinker-Q8_0"]


def test_files_names_a_projector_apart_and_counts_only_the_models_files(
        server: TestServer, storage: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hugging_face_repo(server, storage, REPO, {
        "thinker-Q4_K_M.gguf": b"G" * 100, "mmproj-thinker-f16.gguf": b"G" * 10,
        "big/thinker-F16-00001-of-00002.gguf": b"G" * 900, "big/thinker-F16-00002-of-00002.gguf": b"G" * 700}))

    files = models("files", REPO)
    wrong = models("get", f"{REPO}@Q2_K")

    assert files.returncode == 0, files.stderr
    quantized, split = files.stdout.splitlines()[:2]
    assert " ".join(quantized.split()).endswith(
        "thinker-Q4_K_M.gguf + mmproj-thinker-f16.gguf, which lets it read images (its vision projector)")
    assert "files)" not in quantized and split.endswith("(2 files)")
    assert wrong.returncode == 2 and "It offers: F16, Q4_K_M." in wrong.stderr


def test_search_with_files_lists_each_repository_and_says_why_one_cannot_be(
        server: TestServer, storage: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    serve_search(server, "thinker")
    hugging_face_repo(server, storage, REPO, {"thinker-Q4_K_M.gguf": b"G" * 100})
    hugging_face_repo(server, storage, "someone-else/Thinker-Coder-GGUF", {"coder-IQ4_XS.gguf": b"G" * 50})
    monkeypatch.setenv("HF_ENDPOINT", server.base)

    result = models("search", "thinker", "--files")

    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "    Q4_K_M" in text and "    IQ4_XS" in text
    assert "has no public model repository named someone/Thinker-Large-GGUF" in text, "the gated one"


def test_search_prints_a_recorded_answer_of_the_real_hub(server: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface.co's own answer (recorded, tests/fixtures/hub/README.md): long names keep the
    columns apart, and the order is the hub's."""
    serve_search(server, "gemma", RECORDED_ANSWER)
    monkeypatch.setenv("HF_ENDPOINT", server.base)

    result = models("search", "gemma")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    recorded = [item["id"] for item in json.loads(RECORDED_ANSWER.read_bytes())]
    assert [line.split()[0] for line in lines[1:11]] == recorded
    assert lines[3].split() == ["yuxinlu1/gemma-4-12B-agentic-fable5-composer2.5-v2-3.5x-tau2-GGUF",
                                "355,480", "1,392", "2026-06-19"]
    assert lines[7].split() == ["ornith-ai/Ornith-1.0-9B-GGUF", "4,567,553", "615", "2026-06-25"]


def test_files_says_a_14b_file_is_slow_here_and_a_file_of_unknown_size_has_no_speed(
        server: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: a found file's verdict is its predicted speed on this CPU, from its stated size (the
    bytes are never fetched), calibrated by the thread advisor's threads.json once it measured a model;
    where the server states no size, no number is made up."""
    repo = "Qwen/Qwen3-14B-GGUF"
    monkeypatch.setenv("HF_ENDPOINT", list_sizes(server, repo, {"Qwen3-14B-Q4_K_M.gguf": 9_000_000_000}))
    nameless = "someone/Sizeless-GGUF"
    server.files[f"/api/models/{nameless}?blobs=true"] = Served(body=json.dumps(
        {"id": nameless, "sha": "a" * 40, "siblings": [{"rfilename": "sizeless-Q4_K_M.gguf"}]}).encode())

    estimated = models("files", repo)
    config = data_paths().config
    config.mkdir(parents=True, exist_ok=True)
    key = f"big.gguf|500000000|{os.cpu_count()}|{psutil.cpu_count(logical=False)}"
    (config / "threads.json").write_text(json.dumps({key: {"best": {"1": 25.0}}}), encoding="utf-8")
    [calibrated] = [json.loads(line) for line in models("files", repo, "--json").stdout.splitlines()]
    plain = models("files", repo)
    sizeless = models("files", nameless)
    [unknown] = [json.loads(line) for line in models("files", nameless, "--json").stdout.splitlines()]

    assert estimated.returncode == 0, estimated.stderr
    line = estimated.stdout.splitlines()[0]
    assert line.split()[:3] == ["Q4_K_M", "9.0", "GB"], line
    assert " slow: about " in line and " tokens/s here (estimated) " in line, line
    assert calibrated["verdict"] == "runs_slowly" and 0 < calibrated["tokens_per_s"] < 5
    assert calibrated["speed_measured"] is True
    assert calibrated["reason"].startswith("Slow: about ")
    assert "Estimated from the file size and the size its name states (14B): " in calibrated["reason"]
    words = plain.stdout.splitlines()[0]
    assert " slow: about " in words and "(estimated)" not in words, "calibrated by this machine's measurement"
    assert sizeless.returncode == 0 and "speed not known" in sizeless.stdout.splitlines()[0]
    assert unknown["verdict"] is None and unknown["tokens_per_s"] is None
    assert unknown["reason"].startswith("Speed not known: the server did not state the file's size")
