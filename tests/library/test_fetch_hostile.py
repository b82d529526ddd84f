"""A download into the library whose folder was tampered with (issue 28): Kestrel writes only
inside the model's folder, never through a link planted there."""

from __future__ import annotations

import json
from pathlib import Path

from app.library.download import DownloadOptions
from app.library.fetch import LOCK, MARKER, fetch_unit
from app.library.huggingface.hub import direct_unit
from app.library.models import ModelLibrary
from tests.helpers.http_servers import Served, TestServer

FAST = DownloadOptions(retry_delays=(0.01,), timeout_s=5.0, stall_s=5.0, space_margin=0)


def planted(library: ModelLibrary, url: str) -> Path:
    """The folder an earlier, interrupted download of url left (its marker names url)."""
    folder = library.root / "tiny"
    folder.mkdir(parents=True)
    (folder / MARKER).write_text(json.dumps({"version": 1, "urls": [url], "source": url}))
    return folder


def test_a_lock_file_replaced_by_a_link_creates_nothing_where_it_leads(
        server: TestServer, tmp_path: Path, tiny_model: Path) -> None:
    server.files["/tiny.gguf"] = Served(body=tiny_model.read_bytes())
    url = server.url("/tiny.gguf")
    library = ModelLibrary(tmp_path / "models")
    elsewhere = tmp_path / "elsewhere" / "created by a link.txt"
    elsewhere.parent.mkdir()
    (planted(library, url) / LOCK).symlink_to(elsewhere)

    fetched = fetch_unit(library, direct_unit(url), options=FAST)

    assert not elsewhere.exists(), "the lock was opened through the link"
    assert fetched.model.id == "tiny"


def test_a_model_folder_that_is_a_link_is_not_written_into(
        server: TestServer, tmp_path: Path, tiny_model: Path) -> None:
    server.files["/tiny.gguf"] = Served(body=tiny_model.read_bytes())
    url = server.url("/tiny.gguf")
    library = ModelLibrary(tmp_path / "models")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / MARKER).write_text(json.dumps({"version": 1, "urls": [url], "source": url}))
    library.root.mkdir()
    (library.root / "tiny").symlink_to(elsewhere, target_is_directory=True)

    fetched = fetch_unit(library, direct_unit(url), options=FAST)

    assert sorted(p.name for p in elsewhere.iterdir()) == [MARKER], "written through the folder's link"
    assert fetched.model.id == "tiny-2" and (library.root / "tiny-2" / "tiny.gguf").is_file()
