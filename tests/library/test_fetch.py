"""Downloads straight into the library against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from app.core.files import try_hold_lock
from app.library.download import (DownloadControl, DownloadError, DownloadErrorKind,
                                  DownloadOptions, DownloadProgress, DownloadStopped)
from app.library.fetch import MARKER, FetchRefused, discard_unit, fetch_unit, unit_folder
from app.library.huggingface.hub import DownloadUnit, direct_unit, units_for
from app.library.model_files.model_format import read_onnx_folder
from app.library.models import ModelLibrary
from tests.helpers.http_servers import Served, TestServer, hugging_face_repo, sha256_of

FAST = DownloadOptions(retry_delays=(0.01, 0.02), timeout_s=5.0, chunk_size=16 * 1024, space_margin=0)
TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"


@pytest.fixture
def library(tmp_path: Path) -> ModelLibrary:
    return ModelLibrary(tmp_path / "models")


def everything(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []


def gguf_unit(server: TestServer, storage: TestServer, body: bytes, **kwargs: Any) -> DownloadUnit:
    endpoint = hugging_face_repo(server, storage, "o/tiny-GGUF", {"tiny.gguf": body}, **kwargs)
    [unit] = units_for("o/tiny-GGUF", endpoint)
    return unit


def test_a_gguf_lands_in_its_own_folder_checked_and_registered(
        server: TestServer, storage: TestServer, library: ModelLibrary, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()
    unit = gguf_unit(server, storage, body)

    fetched = fetch_unit(library, unit, options=FAST)

    model = fetched.model
    assert (model.id, model.title, model.sha256) == ("tiny", "tiny", sha256_of(body))
    assert model.source == f"downloaded from {server.base}/o/tiny-GGUF/resolve/main/tiny.gguf"
    assert everything(library.root) == ["tiny", "tiny/model.json", "tiny/tiny.gguf"]
    assert library.get("tiny") is not None and (library.root / "tiny" / "tiny.gguf").read_bytes() == body
    assert fetched.files[0].verified_sha256 and not fetched.already_installed
    again = fetch_unit(library, unit, options=FAST)
    assert again.already_installed and again.model.id == "tiny"
    assert len(storage.requests("GET")) == 1, "an installed unit is not fetched again"


def test_a_download_stopped_by_a_restart_continues_from_its_part(
        server: TestServer, storage: TestServer, library: ModelLibrary, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()
    unit = gguf_unit(server, storage, body)
    storage.files[next(iter(storage.files))].slow_chunk = 16 * 1024
    storage.files[next(iter(storage.files))].slow_delay_s = 0.01
    control = DownloadControl()
    arrived = threading.Event()
    outcome: dict[str, Any] = {}

    def report(p: DownloadProgress) -> None:
        if p.done > 100_000:
            arrived.set()

    def run() -> None:
        try:
            fetch_unit(library, unit, control=control, progress=report, options=FAST)
        except DownloadStopped as exc:
            outcome["stopped"] = exc
    thread = threading.Thread(target=run)
    thread.start()
    assert arrived.wait(10)
    control.stop()  # the app closes
    thread.join(10)
    folder = unit_folder(library, unit, claim=False)
    assert folder is not None and not outcome["stopped"].cancelled
    kept = (folder / "tiny.gguf.part").stat().st_size
    assert 100_000 < kept < len(body) and (folder / MARKER).exists()
    assert library.list() == [], "an unfinished download is never listed"

    fetched = fetch_unit(ModelLibrary(library.root), unit, options=FAST)  # a new app

    assert storage.requests("GET")[-1].range == f"bytes={kept}-"
    assert fetched.model.id == folder.name and fetched.model.sha256 == sha256_of(body)
    assert everything(folder) == ["model.json", "tiny.gguf"]


def test_wrong_bytes_are_deleted_and_nothing_is_listed(
        server: TestServer, storage: TestServer, library: ModelLibrary, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()
    damaged = body[:-1] + bytes([body[-1] ^ 0xFF])
    unit = gguf_unit(server, storage, body, served={"tiny.gguf": damaged})

    with pytest.raises(DownloadError) as caught:
        fetch_unit(library, unit, options=FAST)

    assert caught.value.kind is DownloadErrorKind.DAMAGED and "It was deleted" in str(caught.value)
    assert everything(library.root) == [] and library.list() == []


def test_a_file_that_is_not_a_model_is_deleted_with_a_message(
        server: TestServer, library: ModelLibrary) -> None:
    server.files["/page.gguf"] = Served(body=b"<!doctype html><p>Sign in</p>")

    with pytest.raises(FetchRefused) as caught:
        fetch_unit(library, direct_unit(server.url("/page.gguf")), options=FAST)

    assert caught.value.kind == "not_a_model" and caught.value.message.endswith("The downloaded file was deleted.")
    assert everything(library.root) == []


def test_an_onnx_folder_arrives_as_one_unit_with_its_layout(
        server: TestServer, storage: TestServer, library: ModelLibrary) -> None:
    files = {f"onnx/cpu-int4/{p.name}": p.read_bytes() for p in sorted(TINY_ONNX.iterdir())}
    files["README.md"] = b"# card"
    endpoint = hugging_face_repo(server, storage, "o/tiny-onnx", files)
    [unit] = units_for("o/tiny-onnx", endpoint)

    model = fetch_unit(library, unit, options=FAST).model

    assert model.path == library.root / model.id / "cpu-int4" and model.sha256 is None
    assert sorted(p.name for p in model.path.iterdir()) == sorted(p.name for p in TINY_ONNX.iterdir())
    assert read_onnx_folder(model.path).model_type
    assert model.source == f"downloaded from {endpoint}/o/tiny-onnx/tree/main/onnx/cpu-int4"


def test_a_missing_file_and_a_failing_server_leave_nothing_behind(
        server: TestServer, library: ModelLibrary) -> None:
    server.files["/down.gguf"] = Served(status=500)
    for path, kind in (("/missing.gguf", DownloadErrorKind.NOT_FOUND), ("/down.gguf", DownloadErrorKind.SERVER)):
        with pytest.raises(DownloadError) as caught:
            fetch_unit(library, direct_unit(server.url(path)), options=FAST)
        assert caught.value.kind is kind
    assert everything(library.root) == []


def test_a_unit_another_kestrel_is_fetching_is_refused_and_a_discard_deletes_the_parts(
        server: TestServer, library: ModelLibrary, tiny_model: Path) -> None:
    server.files["/m.gguf"] = Served(body=tiny_model.read_bytes())
    unit = direct_unit(server.url("/m.gguf"))
    claimed = unit_folder(library, unit, claim=True)  # as a download cut short leaves it
    assert claimed is not None
    (claimed / "m.gguf.part").write_bytes(tiny_model.read_bytes()[:50_000])
    folder = unit_folder(library, unit, claim=False)
    assert folder == claimed
    held = try_hold_lock(folder / ".download.lock")
    assert held is not None
    try:
        with pytest.raises(FetchRefused) as caught:
            fetch_unit(library, unit, options=FAST)
        assert caught.value.kind == "busy" and "Another Kestrel is already downloading m" in str(caught.value)
    finally:
        held.release()

    discard_unit(library, unit)

    assert everything(library.root) == []
