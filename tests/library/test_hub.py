"""What a user pastes, turned into downloadable units, against an HF-like server on 127.0.0.1."""

from __future__ import annotations


import pytest

from app.library.catalog import load_catalog, find_entry
from app.library.download import DownloadError, DownloadErrorKind
from app.library.download import FileSpec
from app.library.huggingface.hub import (DownloadUnit, HubError, Pasted, catalog_unit, choose,
                             default_endpoint, direct_unit, parse_pasted, resolve_url, units_for)
from tests.helpers.http_servers import Served, TestServer, hugging_face_repo, sha256_of

HF = "https://huggingface.co"
SHARDS = [f"big/model-Q8_0-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
ONNX = ["cpu/int4/genai_config.json", "cpu/int4/model.onnx", "cpu/int4/model.onnx.data",
        "cpu/int4/tokenizer.json", "cpu/int4/sub/extra.json"]


@pytest.mark.parametrize("text, expected", [
    ("Qwen/Qwen2.5-1.5B-Instruct-GGUF", Pasted("Qwen/Qwen2.5-1.5B-Instruct-GGUF", "main", None, None)),
    (" https://huggingface.co/o/m ", Pasted("o/m", "main", None, None)),
    ("https://hf.co/o/m/tree/dev/cpu/int4", Pasted("o/m", "dev", None, None, "cpu/int4")),
    ("https://huggingface.co/o/m/blob/main/m-Q4_K_M.gguf", Pasted("o/m", "main", "m-Q4_K_M.gguf", None)),
    ("https://huggingface.co/o/m/resolve/refs%2Fpr%2F2/a/b.gguf?download=true",
     Pasted("o/m", "refs/pr/2", "a/b.gguf", None)),
    ("http://192.168.1.5:8000/models/m.gguf", Pasted(None, "main", None, "http://192.168.1.5:8000/models/m.gguf")),
])
def test_every_kind_of_pasted_text(text: str, expected: Pasted) -> None:
    assert parse_pasted(text, HF) == expected


@pytest.mark.parametrize("text, words", [
    ("ftp://example.org/m.gguf", "only from http:// or https://"),
    ("just words", "neither a Hugging Face repository"),
    ("https://huggingface.co/datasets/o/d", "is a Hugging Face dataset, not a model"),
    ("https://huggingface.co/o", "names no Hugging Face model repository"),
    ("https://huggingface.co/o/m/discussions/3", "cannot download from"),
    ("http://host:port/m.gguf", "only from http:// or https://"),
])
def test_text_that_names_nothing_usable_is_refused_in_words(text: str, words: str) -> None:
    with pytest.raises(HubError) as caught:
        parse_pasted(text, HF)
    assert words in str(caught.value)


def test_the_endpoint_follows_hf_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert default_endpoint() == HF
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.lan:8080/")
    assert default_endpoint() == "http://mirror.lan:8080"
    assert resolve_url("o/m", "a b/m.gguf") == "http://mirror.lan:8080/o/m/resolve/main/a%20b/m.gguf"
    assert parse_pasted("http://mirror.lan:8080/o/m/blob/main/m.gguf").repo == "o/m"


def repo(server: TestServer, storage: TestServer) -> str:
    files = {"README.md": b"# card", "m-Q4_K_M.gguf": b"GGUF one", "mmproj-f16.gguf": b"GGUF proj",
             **{path: f"GGUF shard {i}".encode() for i, path in enumerate(SHARDS)},
             **{path: f"onnx {i}".encode() for i, path in enumerate(ONNX)}}
    return hugging_face_repo(server, storage, "o/m", files)


def test_a_repository_lists_each_gguf_each_split_gguf_and_each_onnx_folder_as_one_choice(
        server: TestServer, storage: TestServer) -> None:
    endpoint = repo(server, storage)

    onnx, single, split = units_for("o/m", endpoint)

    assert [e.path for e in server.log] == ["/api/models/o/m?blobs=true"]
    assert (single.key, single.title, single.format) == ("m-Q4_K_M.gguf", "m-Q4_K_M", "gguf")
    # The folder's vision projector comes with the GGUF beside it (never a choice of its own).
    assert single.files == (FileSpec(f"{endpoint}/o/m/resolve/main/m-Q4_K_M.gguf", "m-Q4_K_M.gguf",
                                     sha256_of(b"GGUF one"), 8, "the repository's file list"),
                            FileSpec(f"{endpoint}/o/m/resolve/main/mmproj-f16.gguf", "mmproj-f16.gguf",
                                     sha256_of(b"GGUF proj"), 9, "the repository's file list"))
    assert single.projector == "mmproj-f16.gguf"
    assert split.projector is None, "the projector is in another folder than the split model"
    assert single.source == single.files[0].url
    assert (split.key, split.title) == (SHARDS[0], "model-Q8_0")
    assert [f.name for f in split.files] == [p.split("/")[1] for p in SHARDS]
    assert split.size == sum(len(f"GGUF shard {i}") for i in range(3))
    assert (onnx.key, onnx.format, onnx.source) == ("cpu/int4", "onnx", f"{endpoint}/o/m/tree/main/cpu/int4")
    assert [f.name for f in onnx.files] == ["int4/genai_config.json", "int4/model.onnx",
                                           "int4/model.onnx.data", "int4/tokenizer.json",
                                           "int4/sub/extra.json"]
    assert choose((onnx, single, split), "M-q4_k_m.GGUF") == single
    assert choose((onnx, single, split), "cpu/int4/") == onnx
    assert choose((onnx, single, split), "model-Q8_0-00002-of-00003.gguf") == split
    assert choose((onnx, single, split), "nothing") is None


def test_a_file_address_is_one_unit_and_a_shard_brings_its_whole_split(
        server: TestServer, storage: TestServer) -> None:
    endpoint = repo(server, storage)

    [single] = units_for(f"{endpoint}/o/m/blob/main/m-Q4_K_M.gguf", endpoint)
    assert server.log == [], "one file needs no listing: HEAD gives its hash and size later"
    assert single.files[0].url == f"{endpoint}/o/m/resolve/main/m-Q4_K_M.gguf"
    [split] = units_for(f"https://huggingface.co/o/m/resolve/main/{SHARDS[1]}", endpoint)
    assert len(split.files) == 3
    [onnx] = units_for(f"https://huggingface.co/o/m/blob/main/{ONNX[0]}", endpoint)
    assert onnx.format == "onnx" and len(onnx.files) == 5
    [onnx_again] = units_for(f"{endpoint}/o/m/tree/main/cpu", endpoint)
    assert onnx_again == onnx


def test_a_missing_repository_and_a_server_that_is_not_a_hub_are_said_in_words(
        server: TestServer) -> None:
    with pytest.raises(DownloadError) as caught:
        units_for("o/missing", server.base)
    assert caught.value.kind is DownloadErrorKind.NOT_FOUND
    assert "has no public model repository named o/missing" in str(caught.value)
    server.files["/api/models/o/page?blobs=true"] = Served(body=b"<html>hello</html>")
    with pytest.raises(DownloadError) as caught:
        units_for("o/page", server.base)
    assert "did not answer with a list of a repository's files" in str(caught.value)
    server.files["/api/models/o/down?blobs=true"] = Served(status=500)
    with pytest.raises(DownloadError) as caught:
        units_for("o/down", server.base)
    assert caught.value.kind is DownloadErrorKind.SERVER


def test_a_plain_address_is_taken_as_given() -> None:
    unit = direct_unit("http://10.0.0.2/files/My%20Model.gguf")
    assert (unit.title, unit.files[0].name, unit.source) == ("My Model", "My Model.gguf",
                                                             "http://10.0.0.2/files/My%20Model.gguf")
    assert direct_unit("http://10.0.0.2/get?id=3", "named.gguf").files[0].name == "named.gguf"
    with pytest.raises(HubError, match="does not end in a file name"):
        direct_unit("http://10.0.0.2/")
    with pytest.raises(HubError, match="is not a file name Kestrel can save as"):
        direct_unit("http://10.0.0.2/m.gguf", "../m.gguf")


def test_a_catalog_entry_becomes_a_unit_with_its_hashes_and_the_onnx_layout() -> None:
    entries = load_catalog()
    gguf = catalog_unit(find_entry(entries, "qwen3-4b-q4_k_m"), HF)  # type: ignore[arg-type]
    [file] = gguf.files
    assert file.url == ("https://huggingface.co/Qwen/Qwen3-4B-GGUF/resolve/"
                        "bc640142c66e1fdd12af0bd68f40445458f3869b/Qwen3-4B-Q4_K_M.gguf")
    assert file.name == "Qwen3-4B-Q4_K_M.gguf" and file.sha256 and file.size
    assert gguf.catalog_id == "qwen3-4b-q4_k_m" and gguf.source == file.url
    onnx_entry = next(e for e in entries if e.format == "onnx")
    onnx = catalog_unit(onnx_entry, HF)
    assert onnx.key == "cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4"
    assert all(f.name.startswith("cpu-int4-rtn-block-32-acc-level-4/") for f in onnx.files)
    assert DownloadUnit.from_dict(onnx.to_dict()) == onnx
