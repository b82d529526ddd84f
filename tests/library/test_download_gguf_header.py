"""A .gguf download ends where its own header says the file ends (issue 35, item 9): a server
that sends a valid header and then bytes without end, with no size or a false one, is cut
at the first byte past the tensor data, and bytes that are no GGUF model stop early."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from app.core.units import human_size
from app.library.download import DownloadErrorKind, DownloadOptions, FileSpec
from app.library.download.gguf_extent import GgufExtent
from app.library.model_files.gguf_info import ModelFileError, read_gguf_info
from tests.helpers.http_servers import Served, TestServer, sha256_of
from tests.library.test_download_hostile import bounded, failed
from tests.library.conftest import Counting

MB = 1024 * 1024
CHUNK = 64 * 1024




def options(counting: type[Counting], **changes: object) -> DownloadOptions:
    settings: dict[str, object] = dict(retry_delays=(0.01,), timeout_s=5.0, stall_s=5.0, space_margin=0,
                                       chunk_size=CHUNK, open_part=counting, unstated_cap=256 * MB)
    settings.update(changes)
    return DownloadOptions(**settings)  # type: ignore[arg-type]


def padded_end(path: Path) -> int:
    info = read_gguf_info(path)
    return info.data_end + (-info.data_end % info.alignment)


def assert_cut_at_the_header(error: object, written: int, model: Path, folder: Path) -> None:
    assert getattr(error, "kind", None) is DownloadErrorKind.DAMAGED, error
    assert "more than the model file holds" in str(error), error
    assert written <= padded_end(model), f"{written:,} bytes written past the header's end"
    assert list(folder.iterdir()) == [], "the part is deleted"


@pytest.mark.parametrize("chunked", [False, True], ids=["close-delimited", "chunked"])
def test_an_endless_body_with_no_size_stops_where_the_header_says(
        server: TestServer, tmp_path: Path, tiny_model: Path, counting: type[Counting], chunked: bool) -> None:
    server.files["/m.gguf"] = Served(body=tiny_model.read_bytes(), endless=True, chunked=chunked, head_status=405)

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options(counting))

    assert_cut_at_the_header(error, counting.written, tiny_model, tmp_path)


def test_with_a_sha256_the_cut_comes_before_the_check(
        server: TestServer, tmp_path: Path, tiny_model: Path, counting: type[Counting]) -> None:
    body = tiny_model.read_bytes()
    server.files["/m.gguf"] = Served(body=body, endless=True, head_status=405)

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf", sha256=sha256_of(body)),
                   options=options(counting))

    assert_cut_at_the_header(error, counting.written, tiny_model, tmp_path)


@pytest.mark.parametrize("stated_by", ["the listing", "the server"])
def test_a_stated_size_larger_than_the_header_says_is_cut_at_the_header(
        server: TestServer, tmp_path: Path, tiny_model: Path, counting: type[Counting], stated_by: str) -> None:
    body = tiny_model.read_bytes()
    spec = FileSpec(server.url("/m.gguf"), "m.gguf")
    if stated_by == "the listing":
        server.files["/m.gguf"] = Served(body=body, endless=True, head_status=405)
        spec = FileSpec(spec.url, spec.name, size=3 * len(body), stated_by="the listing")
    else:  # Content-Length says three times the file, and the bytes are there
        server.files["/m.gguf"] = Served(body=body + random.Random(9).randbytes(2 * len(body)))

    error = failed(tmp_path, spec, options=options(counting))

    assert_cut_at_the_header(error, counting.written, tiny_model, tmp_path)


def test_a_server_that_states_more_but_ends_at_the_header_end_sent_nothing_more(
        server: TestServer, tmp_path: Path, tiny_model: Path, counting: type[Counting]) -> None:
    body = tiny_model.read_bytes()
    server.files["/m.gguf"] = Served(body=body, stated_length=2 * len(body))  # a Content-Length it never fills

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options(counting))

    assert "has only" in str(error) and "more than the model file holds" not in str(error), error


def test_a_file_as_long_as_its_header_says_arrives_whole(
        server: TestServer, tmp_path: Path, tiny_model: Path, counting: type[Counting]) -> None:
    body = tiny_model.read_bytes()
    server.files["/m.gguf"] = Served(body=body, endless=True, endless_limit=len(body), head_status=405)

    [done], _ = bounded(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options(counting))

    assert (tmp_path / "m.gguf").read_bytes() == body and done.size == len(body)


def test_a_resumed_download_reads_the_header_from_the_part(
        server: TestServer, tmp_path: Path, tiny_model: Path, counting: type[Counting]) -> None:
    body = tiny_model.read_bytes()
    (tmp_path / "m.gguf.part").write_bytes(body[:100_000])  # the header and more: left by an earlier run
    server.files["/m.gguf"] = Served(body=body + bytes(3 * MB))  # a Range answer with an honest length

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options(counting))

    assert server.requests("GET")[0].range == "bytes=100000-", "it resumed"
    assert_cut_at_the_header(error, 100_000 + counting.written, tiny_model, tmp_path)


def test_a_part_already_past_the_header_end_is_deleted(
        server: TestServer, tmp_path: Path, tiny_model: Path, counting: type[Counting]) -> None:
    body = tiny_model.read_bytes()
    (tmp_path / "m.gguf.part").write_bytes(body + bytes(5000))
    server.files["/m.gguf"] = Served(body=body + bytes(3 * MB))

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options(counting))

    assert_cut_at_the_header(error, counting.written, tiny_model, tmp_path)
    assert counting.written == 0


@pytest.mark.parametrize("which", [0, 1], ids=["the model", "its projector"])
def test_each_gguf_file_of_a_unit_is_held_to_its_own_header(
        server: TestServer, tmp_path: Path, tiny_model: Path, counting: type[Counting], which: int) -> None:
    body = tiny_model.read_bytes()
    names = ["model.gguf", "mmproj-model-f16.gguf"]
    for index, name in enumerate(names):
        server.files[f"/{name}"] = Served(body=body, endless=index == which, head_status=405)

    error = failed(tmp_path, *(FileSpec(server.url(f"/{n}"), n) for n in names), options=options(counting))

    assert error.kind is DownloadErrorKind.DAMAGED and "more than the model file holds" in str(error)
    assert names[which] in str(error)
    assert not any(p.name in names for p in tmp_path.iterdir()), "nothing of the unit is put in place"


def test_a_file_that_is_not_a_gguf_file_is_not_bounded_by_a_header(
        server: TestServer, tmp_path: Path, counting: type[Counting]) -> None:
    body = random.Random(3).randbytes(300_000)  # an ONNX folder's weights: no GGUF header to read
    server.files["/model.onnx.data"] = Served(body=body, endless=True, endless_limit=len(body), head_status=405)

    [done], _ = bounded(tmp_path, FileSpec(server.url("/model.onnx.data"), "model.onnx.data"),
                        options=options(counting))

    assert done.size == len(body)


# --- bytes that are no GGUF model at all ---------------------------------------------------------


@pytest.mark.parametrize("head", [b"<!doctype html><p>Sign in</p>", b"\0" * 64, b"GGUF\x07\0\0\0" + bytes(56)],
                         ids=["a page", "zeros", "another version"])
def test_an_endless_body_that_is_no_gguf_model_stops_early(
        server: TestServer, tmp_path: Path, counting: type[Counting], head: bytes) -> None:
    server.files["/m.gguf"] = Served(body=head, endless=True, head_status=405)

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"),
                   options=options(counting, unreadable_gguf_limit=MB))

    assert error.kind is DownloadErrorKind.DAMAGED and "not a model file Kestrel can use" in str(error)
    assert counting.written <= MB and list(tmp_path.iterdir()) == []
    if head.startswith(b"<!"):
        assert "web page" in str(error)


def test_a_big_stated_body_that_is_no_gguf_model_stops_at_its_first_bytes(
        server: TestServer, tmp_path: Path, counting: type[Counting]) -> None:
    server.files["/m.gguf"] = Served(body=bytes(8 * MB))

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"),
                   options=options(counting, unreadable_gguf_limit=MB))

    assert "not a model file Kestrel can use" in str(error) and counting.written == 0


def test_a_small_body_that_is_no_gguf_model_arrives_for_the_model_check_to_name(
        server: TestServer, tmp_path: Path, counting: type[Counting]) -> None:
    page = b"<!doctype html><p>Sign in</p>"
    server.files["/m.gguf"] = Served(body=page)

    [done], _ = bounded(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options(counting))

    assert (tmp_path / "m.gguf").read_bytes() == page, "fetch's model check says what it is, as before"


def test_a_header_that_never_ends_stops_at_the_header_limit(
        server: TestServer, tmp_path: Path, counting: type[Counting]) -> None:
    # One setting: an array of 2**27 strings of 9 bytes each, arriving for ever.
    head = (b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
            + (9).to_bytes(8, "little") + b"tokenizer" + (9).to_bytes(4, "little") + (8).to_bytes(4, "little")
            + (1 << 27).to_bytes(8, "little"))
    body = head + ((9).to_bytes(8, "little") + b"endlessly") * 150_000  # 2.5 MB of them, no size stated
    server.files["/m.gguf"] = Served(body=body, endless=True, endless_limit=len(body), head_status=405)

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"),
                   options=options(counting, gguf_header_limit=2 * MB, unreadable_gguf_limit=MB))

    assert f"its header goes on past the first {human_size(2 * MB)}" in str(error), error
    assert counting.written <= 2 * MB + CHUNK and list(tmp_path.iterdir()) == []


# --- the header reader agrees with the model check -----------------------------------------------


def _big_vocabulary_model(folder: Path) -> Path:
    path = folder / "vocabulary.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_token_list([f"token{i}".encode() for i in range(50_000)])
    writer.add_token_scores([0.0] * 50_000)
    writer.add_tensor("odd", np.zeros((3, 33), dtype=np.float32))  # 396 bytes: the last tensor is padded
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("piece", [1, 7, 4096, 1 << 20])
def test_the_end_is_the_same_in_any_pieces(tiny_model: Path, tmp_path: Path, piece: int) -> None:
    for model in (tiny_model, _big_vocabulary_model(tmp_path)):
        data = model.read_bytes()
        extent = GgufExtent(64 * MB)
        for at in range(0, len(data), piece):
            extent.feed(data[at:at + piece])
            if extent.done:
                break
        assert (extent.end, extent.problem) == (len(data), None), model.name
        assert extent.end == padded_end(model)


def test_a_header_refused_here_is_refused_by_the_model_check(tiny_model: Path) -> None:
    """Bytes of the header flipped at random: whatever the reader here refuses, gguf_info
    refuses too, and where gguf_info reads the file, the end here is its padded end."""
    original = tiny_model.read_bytes()
    header_end = read_gguf_info(tiny_model).data_start
    rng = random.Random(35)
    refused = 0
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "flipped.gguf"
        for _ in range(300):
            data = bytearray(original)
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(header_end)] ^= 1 << rng.randrange(8)
            path.write_bytes(bytes(data))
            extent = GgufExtent(64 * MB)
            extent.feed(bytes(data))
            try:
                info = read_gguf_info(path)
            except ModelFileError:
                refused += 1
                continue
            assert extent.problem is None, extent.problem
            assert extent.end is not None and extent.end >= info.data_end
            assert extent.end == info.data_end + (-info.data_end % info.alignment)
    assert refused, "some flips damage the header"
