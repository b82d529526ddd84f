"""Hostile repository listings and names (issue 28): parsed defensively, bad names refused in
words, on every OS, and names shown bounded and without control or direction marks."""

from __future__ import annotations

import json
import time

import pytest

from app.library.huggingface import hub_listing
from app.library.download import DownloadError, DownloadErrorKind
from app.library.huggingface.file_names import name_problem, plain_file_name, shown
from app.library.huggingface.hub import HubError, UnsafeNames, direct_unit, units_for
from tests.helpers.http_servers import Served, TestServer, hugging_face_repo


def listing(server: TestServer, repo: str, body: bytes) -> str:
    server.files[f"/api/models/{repo}?blobs=true"] = Served(body=body)
    return server.base


def test_a_listing_nested_deep_is_no_listing_not_a_recursion_error(server: TestServer) -> None:
    endpoint = listing(server, "o/deep", b'{"siblings": ' + b"[" * 400_000 + b"]" * 400_000 + b"}")

    with pytest.raises(DownloadError) as caught:
        units_for("o/deep", endpoint)

    assert caught.value.kind is DownloadErrorKind.REFUSED
    assert "did not answer with a list of a repository's files" in str(caught.value)


def test_a_listing_of_too_many_files_is_no_listing(server: TestServer) -> None:
    siblings = [{"rfilename": f"f{i}.txt"} for i in range(100_001)]
    endpoint = listing(server, "o/many", json.dumps({"siblings": siblings}).encode())

    with pytest.raises(DownloadError, match="did not answer with a list"):
        units_for("o/many", endpoint)


@pytest.mark.parametrize("name, words", [
    ("model\0.gguf", "holds a control character"),
    ("mod\u202eel.gguf", "direction mark"),
    ("CON.gguf", "a name Windows keeps for a device"),
    ("lpt1.gguf", "a name Windows keeps for a device"),
    ("Aux .gguf", "a name Windows keeps for a device"),
    ("x" * 5000 + ".gguf", "longer than the 200 bytes"),
    ("a:b.gguf", "Windows does not allow"),
    ("q4./model.gguf", "ends with a space or a dot"),
    ("a/" * 20 + "model.gguf", "16 folders"),
])
def test_a_listing_whose_only_model_has_a_bad_name_is_refused_in_words(
        server: TestServer, storage: TestServer, name: str, words: str) -> None:
    endpoint = hugging_face_repo(server, storage, "o/bad", {name: b"GGUF", "README.md": b"# card"})

    with pytest.raises(UnsafeNames) as caught:
        units_for("o/bad", endpoint)

    message = str(caught.value)
    assert words in message and "o/bad offers no model Kestrel can save" in message
    assert len(message) < 400 and "\0" not in message and "\u202e" not in message


def test_a_bad_name_beside_good_ones_is_left_out(server: TestServer, storage: TestServer) -> None:
    endpoint = hugging_face_repo(server, storage, "o/mixed", {
        "good.gguf": b"GGUF", "nul.gguf": b"GGUF", "cpu/genai_config.json": b"{}", "cpu/m\0.onnx": b"x"})

    [good] = units_for("o/mixed", endpoint)

    assert good.key == "good.gguf", "the device name and the ONNX folder with a bad file are not offered"


def test_a_file_address_with_a_bad_name_is_refused(server: TestServer) -> None:
    with pytest.raises(UnsafeNames, match="a name Windows keeps for a device"):
        units_for(f"{server.base}/o/m/resolve/main/com1.gguf", server.base)


@pytest.mark.parametrize("name", ["CON.gguf", "m\u202egguf.exe", "x" * 201, "a\tb.gguf", "nul"])
def test_a_saved_as_name_must_hold_on_every_os(name: str) -> None:
    assert not plain_file_name(name)
    with pytest.raises(HubError) as caught:
        direct_unit("http://10.0.0.2/m.gguf", name)
    assert "is not a file name Kestrel can save as: it" in str(caught.value)
    assert len(str(caught.value)) < 400 and "\t" not in str(caught.value)


@pytest.mark.parametrize("name", ["model.gguf", "Qwen2.5-1.5B-Instruct-Q4_K_M.gguf", "console.gguf",
                                  "com10.gguf", "ünï cödé.gguf", "x" * 195 + ".gguf"])
def test_ordinary_names_pass(name: str) -> None:
    assert name_problem(name) is None and plain_file_name(name)
    assert name_problem(f"cpu/int4/{name}") is None


def test_names_are_shown_bounded_and_without_marks() -> None:
    assert shown("a\u202eb\x1b[31mc") == "a\ufffdb\ufffd[31mc"
    long = shown("x" * 5000)
    assert len(long) == 120 and long.endswith("…")


def test_a_listing_that_trickles_is_given_up_on(server: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_listing, "_LISTING_S", 0.5)
    server.files["/api/models/o/slow?blobs=true"] = Served(body=b'{"siblings": []}' + b" " * 1000,
                                                           slow_chunk=10, slow_delay_s=0.05)
    started = time.monotonic()

    with pytest.raises(DownloadError) as caught:
        units_for("o/slow", server.base)

    assert "did not arrive within 0.5 s" in str(caught.value) and time.monotonic() - started < 3
