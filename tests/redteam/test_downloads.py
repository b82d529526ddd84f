"""Red team, issue 35 item 9: `kestrel models get` from a server that sends a valid GGUF header
and then bytes without end, stating no size (or a false one). It stops at the first byte past
the tensor data the header describes, deletes the part, installs nothing and says so, exit 7.

Real processes and real HTTP on 127.0.0.1. Each endless body is cut by the test server at
ENDLESS_NET, far past the file, so that a Kestrel that does not stop by itself fails the
test (it installs the model) instead of filling the disk. tests/library/test_download_gguf_header.py
counts the bytes written, which a separate process does not show.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from pathlib import Path

from app.core.paths import data_paths
from tests.cli.test_chat_cli import kestrel
from tests.helpers.http_servers import Served, TestServer, hugging_face_repo, sha256_of

ENDLESS_NET = 48 * 1024 * 1024
HEADER_WORDS = "more than the model file holds"
EXIT_NOT_DONE = 7


def get(*args: str) -> subprocess.CompletedProcess:
    return kestrel("models", "get", *args, timeout=120)


def assert_refused(result: subprocess.CompletedProcess, words: str = HEADER_WORDS) -> None:
    assert result.returncode == EXIT_NOT_DONE, (result.returncode, result.stderr[-2000:])
    assert words in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and result.stdout == ""
    models = data_paths().models
    left = sorted(str(p.relative_to(models)) for p in models.rglob("*")) if models.exists() else []
    assert left == [], f"left in the models folder: {left}"
    listed = kestrel("models", "list", "--json")
    assert listed.returncode == 0 and listed.stdout.strip() in ("", "[]"), "no model is installed"


@pytest.mark.parametrize("chunked", [False, True], ids=["close-delimited", "chunked"])
def test_an_endless_body_with_no_size_stops_at_the_header_end(
        server: TestServer, tiny_model: Path, chunked: bool) -> None:
    server.files["/files/tiny.gguf"] = Served(body=tiny_model.read_bytes(), endless=True, chunked=chunked,
                                              endless_limit=ENDLESS_NET, head_status=405)

    assert_refused(get(server.url("/files/tiny.gguf")))


def test_with_sha256_the_body_stops_at_the_header_end_before_the_check(server: TestServer, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()
    server.files["/files/tiny.gguf"] = Served(body=body, endless=True, endless_limit=ENDLESS_NET, head_status=405)

    assert_refused(get(server.url("/files/tiny.gguf"), "--sha256", sha256_of(body)))


@pytest.mark.parametrize("listed", ["larger", "true"])
def test_a_listing_size_bounds_an_endless_body(server: TestServer, storage: TestServer, tiny_model: Path,
                                               monkeypatch: pytest.MonkeyPatch, listed: str) -> None:
    body = tiny_model.read_bytes()
    endpoint = hugging_face_repo(server, storage, "o/endless", {"tiny.gguf": body})
    [blob] = storage.files.values()
    blob.endless, blob.endless_limit = True, ENDLESS_NET
    if listed == "larger":  # the listing, and the redirect's X-Linked-Size, say 40 times the file
        path = "/api/models/o/endless?blobs=true"
        listing = json.loads(server.files[path].body)
        listing["siblings"][0]["size"] = listing["siblings"][0]["lfs"]["size"] = 40 * len(body)
        server.files[path].body = json.dumps(listing).encode()
        server.files["/o/endless/resolve/main/tiny.gguf"].linked_size = 40 * len(body)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)

    result = get("o/endless")

    assert_refused(result, HEADER_WORDS if listed == "larger" else "the server sent more than the")


def test_an_endless_body_that_is_no_gguf_model_stops_early(server: TestServer) -> None:
    server.files["/files/model.gguf"] = Served(body=b"<!doctype html><p>Sign in to continue</p>", endless=True,
                                               endless_limit=ENDLESS_NET, head_status=405)

    assert_refused(get(server.url("/files/model.gguf")), "is not a model file Kestrel can use")


def test_a_body_that_ends_with_its_tensor_data_is_installed(server: TestServer, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()
    server.files["/files/tiny.gguf"] = Served(body=body, endless=True, endless_limit=len(body), head_status=405)

    result = get(server.url("/files/tiny.gguf"))

    assert result.returncode == 0, result.stderr
    assert (data_paths().models / "tiny" / "tiny.gguf").read_bytes() == body
