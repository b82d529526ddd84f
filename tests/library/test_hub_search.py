"""Hugging Face's model search (issue 26): the GET list_models sends, its answer read defensively,
a found repository's files with their quantizations; against a real server on 127.0.0.1."""

from __future__ import annotations

import json
import socket

import pytest

from app.library.download import DownloadError, DownloadErrorKind
from app.library.huggingface.hub import default_endpoint
from app.library.huggingface.hub_search import (HubRepo, choices_of, offered_quantizations, onnx_precision, parse_search_answer,
                                    pick_quantization, quantization, repo_choices, search_models, search_url)
from tests.helpers.http_servers import TestServer, hugging_face_repo, running_server
from tests.helpers.hub_answers import EMPTY_ANSWER, RECORDED_ANSWER, THINKER_ANSWER, serve_search


def test_the_search_sends_list_models_parameters_and_reads_the_repositories(server: TestServer) -> None:
    path = serve_search(server, "thinker")

    found = search_models("thinker", server.base)

    assert [(e.method, e.path) for e in server.log] == [("GET", path)], "one GET, nothing else"
    assert [r.id for r in found] == ["someone/Thinker-GGUF", "someone-else/Thinker-Coder-GGUF",
                                     "someone/Thinker-Large-GGUF"]
    first = found[0]
    assert (first.downloads, first.likes, first.updated, first.pipeline_tag) == (48210, 312, "2026-09-19",
                                                                                 "text-generation")
    assert "gguf" in first.tags and not first.gated and not first.private
    assert found[2].gated, '"manual" is a gated repository'


def test_the_fixture_is_read_as_huggingface_hub_reads_it() -> None:
    """Every field the client reads has the name ModelInfo.__init__ pops from the answer."""
    for item in json.loads(THINKER_ANSWER.read_bytes()):
        assert set(item) <= {"_id", "id", "downloads", "likes", "lastModified", "tags", "pipeline_tag",
                             "gated", "private"}
        assert item["gated"] in (False, "auto", "manual")


def test_a_query_with_spaces_and_a_limit_and_onnx_are_sent_as_given(server: TestServer) -> None:
    path = serve_search(server, "tiny llama & co", EMPTY_ANSWER, limit=5, fmt="onnx")

    assert search_models("  tiny llama & co ", server.base, limit=5, fmt="onnx") == []
    assert server.requests("GET", path), server.log
    assert search_url("x", "https://hf.example/", 5).startswith("https://hf.example/api/models?filter=gguf&search=x&")


def test_hf_endpoint_names_the_mirror_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9/mirror/")
    assert search_url("q", default_endpoint()).startswith("http://127.0.0.1:9/mirror/api/models?")


@pytest.mark.parametrize("body", [b"{not json", b'{"models": []}', b"[" * 300_000 + b"]" * 300_000,
                                  b"<html>Sign in</html>"])
def test_an_answer_that_is_not_a_list_of_models_is_said_in_words(server: TestServer, body: bytes) -> None:
    serve_search(server, "thinker", body)

    with pytest.raises(DownloadError) as caught:
        search_models("thinker", server.base)

    assert caught.value.kind is DownloadErrorKind.REFUSED
    assert "did not answer with a list of models" in caught.value.message
    assert "Kestrel expects a Hugging Face server or a mirror of one" in caught.value.message


def test_entries_without_a_usable_id_or_with_odd_facts_are_read_defensively() -> None:
    body = json.dumps([{"id": 7}, {"id": "../../etc"}, "text", {"modelId": "old/Style-GGUF", "downloads": -3,
                       "likes": True, "tags": ["gguf", 5], "lastModified": 12, "gated": "auto"}]).encode()

    assert parse_search_answer(body, "http://h/api/models") == [
        HubRepo("old/Style-GGUF", None, None, None, ("gguf",), None, True, False)]


def test_a_server_that_is_not_there_is_said_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    with pytest.raises(DownloadError) as caught:
        search_models("thinker", f"http://127.0.0.1:{port}")

    assert caught.value.kind is DownloadErrorKind.NETWORK
    assert caught.value.message.startswith(f"Could not reach 127.0.0.1:{port}: it refused the connection")


def test_a_server_error_is_given_up_on_after_one_try(server: TestServer) -> None:
    path = serve_search(server, "thinker", b"", status=503)

    with pytest.raises(DownloadError):
        search_models("thinker", server.base)

    assert len(server.requests("GET", path)) == 1, "a search is not retried: the user types again"


@pytest.mark.parametrize("query", ["", "   ", "x" * 201])
def test_an_empty_or_huge_query_sends_nothing(server: TestServer, query: str) -> None:
    with pytest.raises(ValueError):
        search_models(query, server.base)
    assert server.log == []


@pytest.mark.parametrize("name, quant", [
    ("thinker-Q4_K_M.gguf", "Q4_K_M"), ("Thinker-7B-q5_k_s.gguf", "Q5_K_S"), ("t.Q8_0.gguf", "Q8_0"),
    ("t-IQ4_XS.gguf", "IQ4_XS"), ("t-IQ2_XXS.gguf", "IQ2_XXS"), ("t-f16.gguf", "F16"), ("t-BF16.gguf", "BF16"),
    ("Qwen2.5-0.5B-Instruct-Q4_0_4_4.gguf", "Q4_0_4_4"), ("t-UD-Q4_K_XL.gguf", "Q4_K_XL"),
    ("sub/Q6_K/t-Q6_K-00001-of-00002.gguf", "Q6_K"), ("t-Q8_0-imat-Q4_K_M.gguf", "Q4_K_M"),
    ("Qwen2.5-1.5B.gguf", None), ("model.gguf", None), ("t-MXFP4_MOE.gguf", "MXFP4_MOE"),
])
def test_the_quantization_is_read_from_the_file_name(name: str, quant: str | None) -> None:
    assert quantization(name) == quant


def test_an_onnx_folder_states_its_precision() -> None:
    assert onnx_precision("cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4") == "INT4"
    assert onnx_precision("directml/directml-int4-awq-block-128") == "INT4"
    assert onnx_precision("cuda/cuda-fp16") == "FP16"
    assert onnx_precision(".") is None


def test_a_found_repository_lists_its_choices_with_quantizations_and_sizes() -> None:
    with running_server() as front, running_server() as storage:
        endpoint = hugging_face_repo(front, storage, "someone/Thinker-GGUF", {
            "thinker-Q8_0.gguf": b"G" * 800, "thinker-Q4_K_M.gguf": b"G" * 400, "README.md": b"hi",
            "big/thinker-F16-00001-of-00002.gguf": b"G" * 900, "big/thinker-F16-00002-of-00002.gguf": b"G" * 700,
            "mmproj-thinker-f16.gguf": b"G" * 50})

        choices = repo_choices("someone/Thinker-GGUF", endpoint)

    # The projector beside the root folder's files comes with each of them (its bytes counted);
    # the F16 shards' folder has none. Smallest first; the mmproj is no choice of its own.
    assert [(c.quantization, c.unit.size, len(c.unit.files), c.unit.projector) for c in choices] == [
        ("Q4_K_M", 450, 2, "mmproj-thinker-f16.gguf"), ("Q8_0", 850, 2, "mmproj-thinker-f16.gguf"),
        ("F16", 1600, 2, None)]
    assert pick_quantization(choices, "q8_0") is choices[1]
    assert pick_quantization(choices, " f16 ") is choices[2]
    assert pick_quantization(choices, "Q2_K") is None
    assert offered_quantizations(choices) == ["F16", "Q4_K_M", "Q8_0"]
    assert choices_of(reversed([c.unit for c in choices])) == choices
    # A listing names the projector apart, and counts only the model's own files.
    assert [c.unit.parts_words for c in choices] == [
        " + mmproj-thinker-f16.gguf, which lets it read images (its vision projector)",
        " + mmproj-thinker-f16.gguf, which lets it read images (its vision projector)", " (2 files)"]


def test_a_recorded_answer_of_the_real_hub_is_read_whole(server: TestServer) -> None:
    """huggingface.co's own answer (tests/fixtures/hub/README.md: recorded 2026-08-07 by another
    project): ten GGUF repositories with fields Kestrel does not ask for (`gguf` with whole chat
    templates, `siblings`, `trendingScore`) and without `tags` / `pipeline_tag` / `gated`."""
    serve_search(server, "gemma", RECORDED_ANSWER)

    found = search_models("gemma", server.base)

    recorded = json.loads(RECORDED_ANSWER.read_bytes())
    assert [r.id for r in found] == [item["id"] for item in recorded] and len(found) == 10
    assert [(r.downloads, r.likes, r.updated) for r in found[:2]] == [(31489, 142, "2026-08-06"),
                                                                      (43993, 42, "2026-08-07")]
    assert found[6].id == "ornith-ai/Ornith-1.0-9B-GGUF" and found[6].downloads == 4567553
    assert all(r.tags == () and r.pipeline_tag is None and not r.gated and not r.private for r in found)
