"""`models get` and `models catalog` as a user runs them: real processes, real HTTP servers on
127.0.0.1 (HF_ENDPOINT points the catalog and the Hub lister at them), never the internet."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from app.core.paths import data_paths
from app.library.catalog import CATALOG_FILE, find_entry, load_catalog
from tests.cli.test_chat_cli import ROOT, kestrel
from tests.helpers.http_servers import Served, TestServer, hugging_face_repo, sha256_of


def models(*args: str) -> subprocess.CompletedProcess:
    result = kestrel("models", *args, timeout=60)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result


def in_models_folder() -> list[str]:
    folder = data_paths().models
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def info(model_id: str) -> dict:
    return json.loads(models("info", model_id, "--json").stdout)


def test_catalog_lists_the_models_in_words_and_as_json() -> None:
    entries = load_catalog()
    text, as_json = models("catalog"), models("catalog", "--json")

    assert text.returncode == as_json.returncode == 0 and text.stderr == ""
    listed = [line for line in text.stdout.splitlines() if line and not line.startswith("Recommended for")]
    assert len(listed) == len(entries)
    # Issue 37: the mark is this machine's pick (the best model that runs comfortably here), not the
    # catalog file's static flag; exactly one row carries it, and the last line says why.
    [marked] = [line for line in listed if line.endswith("(recommended for this machine)")]
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    [here] = [r for r in rows if r["recommended_here"]]
    assert marked.startswith(here["id"] + " ") and here["purpose"] == "chat"
    assert text.stdout.splitlines()[-1].startswith(f"Recommended for this machine: {here['id']}. About ")
    assert all(r["verdict"] in ("runs_well", "usable", "runs_slowly", "wont_fit") for r in rows if r is not here
               and r["purpose"] == "chat")
    if here["verdict"] == "runs_well":
        assert not any(r["verdict"] == "runs_well" and r["recommended"] and (r["size"] or 0) > (here["size"] or 0)
                       and not here["recommended"] for r in rows)
    assert [r["id"] for r in rows] == [e.id for e in entries]
    assert {"license", "size", "context_length", "repo", "files"} <= set(rows[0])
    # The embedding model is listed, and said not to chat, in words and as JSON.
    [embedding] = [r for r in rows if r["purpose"] == "embedding"]
    assert all(r["purpose"] == "chat" for r in rows if r is not embedding)
    line = next(t for t in text.stdout.splitlines() if t.startswith(embedding["id"] + " "))
    assert line.endswith("[embedding]  (embedding: for document search, not chat)") and embedding["verdict"] is None


def test_catalog_sorts_by_speed_here_and_keeps_only_what_runs_well() -> None:
    by_speed = [json.loads(line) for line in models("catalog", "--json", "--sort", "speed").stdout.splitlines()]
    order = {"runs_well": 0, "usable": 1, "runs_slowly": 2, "wont_fit": 3, None: 4}
    ranks = [(order[r["verdict"]], -(r["tokens_per_s"] or 0)) for r in by_speed]
    assert ranks == sorted(ranks) and len(by_speed) == len(load_catalog())
    well = [json.loads(line) for line in models("catalog", "--json", "--runs-well").stdout.splitlines()]
    assert well and {r["verdict"] for r in well} == {"runs_well"}


def models_with_catalog(catalog: Path, *args: str) -> subprocess.CompletedProcess:
    """`kestrel models ...` reading another catalog file than the shipped one."""
    code = ("import runpy, sys; from pathlib import Path; import app.library.catalog as c; "
            "c.CATALOG_FILE = Path(sys.argv.pop(1)); runpy.run_module('app', run_name='__main__')")
    result = subprocess.run([sys.executable, "-c", code, str(catalog), "models", *args], cwd=ROOT,
                            capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result


def test_get_a_catalog_model_from_the_hub_endpoint(server: TestServer, storage: TestServer, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # An ONNX entry that leaves its files' hashes and sizes to the server (the shipped one
    # with them taken out: it states most of them now); the tiny ONNX fixture stands in for
    # each of its files (its genai_config names the entry's decoder file).
    shipped = json.loads(CATALOG_FILE.read_text(encoding="utf-8"))
    raw = next(m for m in shipped["models"] if m["format"] == "onnx")
    raw["files"] = [{"path": f["path"]} for f in raw["files"]]
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(shipped), encoding="utf-8")
    entry = next(e for e in load_catalog(catalog) if e.id == raw["id"])
    assert all(f.sha256 is None and f.size is None for f in entry.files)
    monkeypatch.setenv("HF_ENDPOINT", hugging_face_repo(server, storage, entry.repo, _onnx_files(entry),
                                                        revision=entry.revision))
    get = partial(models_with_catalog, catalog, "get")

    result = get(entry.id)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == entry.id and in_models_folder() == [entry.id]
    assert "every file's SHA-256 matches the one the server stated" in result.stderr
    shown = info(entry.id)
    folder = entry.files[0].path.rsplit("/", 1)[0]
    assert shown["title"] == entry.name and shown["format"] == "onnx"
    assert shown["source"] == f"downloaded from {server.base}/{entry.repo}/tree/{entry.revision}/{folder}"
    again = get(entry.id)
    assert again.returncode == 0 and "already installed as" in again.stderr


def test_a_pinned_catalog_model_the_server_now_offers_otherwise_is_refused_before_downloading(
        server: TestServer, storage: TestServer, tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = find_entry(load_catalog(), "qwen2.5-coder-0.5b-instruct-q4_k_m")
    assert entry is not None and entry.files[0].sha256 and len(entry.revision) == 40
    monkeypatch.setenv("HF_ENDPOINT", hugging_face_repo(server, storage, entry.repo,
                                                        {entry.files[0].path: tiny_model.read_bytes()},
                                                        revision=entry.revision))

    result = models("get", entry.id)

    assert result.returncode == 7 and result.stdout == ""
    assert (f"The server now offers a different {entry.files[0].path} than the catalog expects "
            f"({server.base}/{entry.repo}/resolve/{entry.revision}/{entry.files[0].path}). Nothing was "
            "downloaded; the catalog may be out of date.") in result.stderr
    assert in_models_folder() == []


def test_the_pinned_onnx_entry_is_refused_when_the_server_offers_other_files(
        server: TestServer, storage: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The shipped ONNX entry states its decoder's and weights' SHA-256 at a pinned revision:
    # a server offering other bytes under those names is refused before anything is saved.
    entry = next(e for e in load_catalog() if e.format == "onnx")
    assert len(entry.revision) == 40 and any(f.sha256 for f in entry.files)
    monkeypatch.setenv("HF_ENDPOINT", hugging_face_repo(server, storage, entry.repo, _onnx_files(entry),
                                                        revision=entry.revision))

    result = models("get", entry.id)

    assert result.returncode == 7 and result.stdout == ""
    assert "than the catalog expects" in result.stderr and "Nothing was downloaded" in result.stderr
    assert in_models_folder() == []


def _onnx_files(entry) -> dict[str, bytes]:
    fixture = ROOT / "tests" / "fixtures" / "tiny-onnx"
    decoder = next(f.path.rsplit("/", 1)[-1] for f in entry.files if f.path.endswith(".onnx"))
    files = {}
    for f in entry.files:
        name = f.path.rsplit("/", 1)[-1]
        if name == "genai_config.json":
            config = json.loads((fixture / name).read_text(encoding="utf-8"))
            config["model"]["decoder"]["filename"] = decoder
            files[f.path] = json.dumps(config).encode()
        elif name.endswith((".onnx", ".onnx.data")):
            files[f.path] = (fixture / ("model" + name[len(decoder) - len(".onnx"):])).read_bytes()
        else:
            files[f.path] = (fixture / name).read_bytes() if (fixture / name).exists() else b"{}"
    return files


def test_get_offline_says_what_it_tried_and_fails_on_the_first_try(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = load_catalog()[0]
    monkeypatch.setenv("HF_ENDPOINT", "https://nonexistent.invalid")  # RFC 6761: never resolves

    result = models("get", entry.id)

    said = result.stderr.splitlines()
    assert result.returncode == 7 and result.stdout == ""
    assert said[0] == "Looking up nonexistent.invalid…"
    assert said[-1].startswith("kestrel: Could not reach nonexistent.invalid: no network connection? ")
    assert "tries" not in result.stderr and in_models_folder() == []


def test_a_repository_with_several_models_asks_for_file(server: TestServer, storage: TestServer,
                                                        tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = tiny_model.read_bytes()
    monkeypatch.setenv("HF_ENDPOINT", hugging_face_repo(server, storage, "o/tiny-GGUF", {
        "tiny-Q4_K_M.gguf": body, "tiny-Q8_0.gguf": body, "README.md": b"# card"}))

    asked = models("get", "o/tiny-GGUF")
    wrong = models("get", "https://huggingface.co/o/tiny-GGUF", "--file", "tiny-Q2_K.gguf")
    chosen = models("get", "https://huggingface.co/o/tiny-GGUF", "--file", "tiny-q8_0.gguf")

    assert asked.returncode == 2 and "choose one with --file NAME" in asked.stderr
    assert "tiny-Q4_K_M.gguf" in asked.stderr and "tiny-Q8_0.gguf" in asked.stderr
    assert wrong.returncode == 2 and 'no file or folder named "tiny-Q2_K.gguf"' in wrong.stderr
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.strip() == "tiny-Q8_0" and in_models_folder() == ["tiny-Q8_0"]


def serve(server: TestServer, body: bytes, **behaviour) -> str:
    server.files["/files/tiny.gguf"] = Served(body=body, **behaviour)
    return server.url("/files/tiny.gguf")


def test_get_a_plain_address_verified_against_the_servers_hash(server: TestServer, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()
    url = serve(server, body, linked_sha256=sha256_of(body), linked_size=len(body))

    result = models("get", url)

    assert result.returncode == 0, result.stderr
    assert "its SHA-256 matches the one the server stated" in result.stderr
    host = server.base.removeprefix("http://")
    said = result.stderr.splitlines()
    assert said[:2] == [f"Connecting to {host}…", f"Waiting for {host} to answer…"], "said before any byte"
    assert any(line.startswith("Downloading tiny.gguf: ") for line in said), "progress from the first byte"
    assert info("tiny")["source"] == f"downloaded from {url}"
    assert in_models_folder() == ["tiny"] and sorted(p.name for p in (data_paths().models / "tiny").iterdir()) == [
        "model.json", "tiny.gguf"], "the file went straight to its place: no copy, no leftovers"


def test_an_interrupted_get_keeps_what_arrived_and_the_same_command_resumes(
        server: TestServer, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()
    url = serve(server, body, linked_sha256=sha256_of(body), slow_chunk=16 * 1024, slow_delay_s=0.2)
    proc = subprocess.Popen([sys.executable, "-m", "app", "models", "get", url], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        part = _wait_for_part(time.monotonic())
        second = models("get", url)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    kept = part.stat().st_size
    server.files["/files/tiny.gguf"].slow_delay_s = 0.0

    resumed = models("get", url)

    assert second.returncode == 7 and "Another Kestrel is already downloading tiny" in second.stderr
    assert proc.returncode == 130 and out == "" and "Traceback" not in err
    assert "Downloading tiny.gguf:" in err and "Download stopped" in err
    assert "Run the same command again to continue" in err and 0 < kept < len(body)
    assert resumed.returncode == 0, resumed.stderr
    assert [(e.range, e.status) for e in server.requests("GET")][-1] == (f"bytes={kept}-", 206)
    assert info("tiny")["sha256"] == sha256_of(body)


def _wait_for_part(started: float) -> Path:
    while True:
        parts = list(data_paths().models.glob("*/*.part"))
        if parts and parts[0].stat().st_size and time.monotonic() - started > 1.5:
            return parts[0]
        assert time.monotonic() - started < 20, "the download never started"
        time.sleep(0.05)


@pytest.mark.parametrize("path, extra, status, words", [
    ("/missing.gguf", [], 7, "There is no file at"),
    ("/login.gguf", [], 7, "then add it with: kestrel models add PATH"),
    ("/page.gguf", [], 3, "The downloaded file was deleted"),
    ("/", [], 2, "does not end in a file name"),
    ("/page.gguf", ["--sha256", "abc"], 2, "is not a SHA-256"),
    ("/page.gguf", ["--name", "../x.gguf"], 2, "is not a file name"),
    ("/page.gguf", ["--sha256", "ab" * 32], 7, "is not the one given with --sha256"),
])
def test_get_refusals_name_the_problem(server: TestServer, path: str, extra: list[str], status: int,
                                       words: str) -> None:
    server.files["/page.gguf"] = Served(body=b"<!doctype html><p>Sign in</p>")
    server.files["/login.gguf"] = Served(status=401)

    result = models("get", server.url(path), *extra)

    assert result.returncode == status and words in result.stderr and result.stdout == ""
    assert in_models_folder() == []


@pytest.mark.parametrize("what, words", [
    ("ftp://example.org/model.gguf", "only from http:// or https://"),
    ("no-such-catalog-id", "kestrel models catalog"),
])
def test_get_of_something_that_is_no_address(what: str, words: str) -> None:
    result = models("get", what)

    assert result.returncode == 2 and words in result.stderr


def test_only_get_loads_the_network_code() -> None:
    code = ("import sys; from app.__main__ import main; main(['models', 'catalog']); "
            "print(sorted(m for m in sys.modules if m.startswith(('app.library.download', 'app.library.huggingface.hub'))))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert result.returncode == 0 and result.stdout.strip().endswith("[]"), result.stdout + result.stderr
