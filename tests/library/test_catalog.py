"""The curated catalog: the shipped file reads whole, a damaged entry is skipped with a reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.library.catalog import (CATALOG_FILE, CatalogFile, CatalogShape, embedding_entries, find_entry,
                                 load_catalog, recommended_entry)
from app.library.model_files.model_purpose import ModelPurpose


def test_the_shipped_catalog_reads_without_a_problem() -> None:
    problems: list[str] = []
    entries = load_catalog(problems=problems)

    assert problems == [] and 7 <= len(entries) <= 13
    assert {e.format for e in entries} == {"gguf", "onnx"}
    recommended = recommended_entry(entries)
    assert recommended is not None and recommended.format == "gguf" and recommended.instruct
    assert recommended.size is not None, "the first-run offer shows its size"
    chat = [e for e in entries if e.purpose is ModelPurpose.CHAT]
    assert all(e.instruct for e in chat) and len(chat) == len(entries) - 1
    # One embedding model for document search, with the numbers a download checks.
    [embedding] = embedding_entries(entries)
    assert embedding.id == "all-minilm-l6-v2-q8_0" and embedding.format == "gguf"
    assert not embedding.instruct and not embedding.recommended and embedding.capabilities == ()
    assert embedding.files == (CatalogFile("all-MiniLM-L6-v2-Q8_0.gguf",
                                           "263215c3cadd6e16740741a7624ab4cbb6c8e777688bd5331ecfbf5681c2f8ed",
                                           25008064),)
    assert embedding.size == 25008064 and embedding.context_length == 512
    onnx = [e for e in entries if e.format == "onnx"]
    assert len(onnx) == 1 and all(any(f.path.endswith("/genai_config.json") for f in e.files) for e in onnx)
    assert find_entry(entries, recommended.id.upper()) == recommended
    # Every shipped model carries the numbers the memory estimate needs.
    assert all(e.shape is not None for e in entries)
    qwen3_30b = find_entry(entries, "qwen3-30b-a3b-q4_k_m")
    assert qwen3_30b is not None and qwen3_30b.shape == CatalogShape(48, 4, 128, 2048, 151936)


def test_every_shipped_entry_is_pinned_to_a_revision_with_every_files_bytes_and_checksum() -> None:
    """Issue 26: sizes known for every entry (so every one has a size and a fit verdict before
    a download), nothing downloaded from a moving branch unchecked. Phi-3.5 mini's ONNX folder
    left the catalog for this: two of its small files' sizes could not be found."""
    entries = load_catalog()
    for entry in entries:
        assert re.fullmatch(r"[0-9a-f]{40}", entry.revision), entry.id
        assert entry.size is not None and all(f.sha256 and f.size for f in entry.files), entry.id
    assert find_entry(entries, "phi-3.5-mini-instruct-onnx-cpu-int4") is None


def test_granite_41_is_a_dense_model_with_a_kv_cache_on_every_layer() -> None:
    """IBM's own GGUF at a pinned revision; its shape says every one of the 40 layers keeps a
    KV cache (a dense transformer, not a Mamba hybrid), so the fit counts all of them."""
    granite = find_entry(load_catalog(), "granite-4.1-8b-q4_k_m")
    assert granite is not None and granite.repo == "ibm-granite/granite-4.1-8b-GGUF" and not granite.recommended
    assert granite.revision == "865b82c2e7970d82e3731278c88c57ae7138359c"
    assert granite.files == (CatalogFile("granite-4.1-8b-Q4_K_M.gguf",
                                         "ed902ac9eb6adce5a90c6a08c8ea201b50e23fdc5976d1cd0362006afac5309e",
                                         5347914400),)
    assert granite.shape == CatalogShape(40, 8, 128, 4096, 100352) and granite.context_length == 131072


def test_gpt_oss_20b_is_pinned_and_its_window_and_heads_count_in_the_fit() -> None:
    """Issue 26: gpt-oss 20B, in once the engine tells its analysis channel apart
    (app/engine/answers/harmony.py); ggml-org's MXFP4 file, the full SHA-256 as unrelated projects pin it."""
    from app.library.fit_facts import facts_for_catalog

    gpt_oss = find_entry(load_catalog(), "gpt-oss-20b-mxfp4")
    assert gpt_oss is not None and gpt_oss.repo == "ggml-org/gpt-oss-20b-GGUF" and not gpt_oss.recommended
    assert gpt_oss.revision == "e1dc459feff949ff451ce107337a2026daa80df8"
    assert gpt_oss.files == (CatalogFile("gpt-oss-20b-mxfp4.gguf",
                                         "be37a636aca0fc1aae0d32325f82f6b4d21495f06823b5fbc1898ae0303e9935",
                                         12109566560),)
    assert gpt_oss.capabilities == ("tools", "reasoning") and gpt_oss.license == "apache-2.0"
    assert gpt_oss.context_length == 131072 and gpt_oss.instruct
    # 12 of its 24 layers look back 128 tokens; it has 64 query heads, not 2,880 / 64.
    assert gpt_oss.shape == CatalogShape(24, 8, 64, 2880, 201088, 128, 12, 64)
    facts = facts_for_catalog(gpt_oss, 8192)
    assert facts is not None and facts.shape.head_count == 64
    # Every layer keeps the full context: the engine loads with swa_full (a later turn reuses the cache).
    assert facts.kv_cache_bytes == 2 * 24 * 8 * 64 * 2 * 8192


def test_the_phi4_mini_onnx_entry_states_every_file_so_its_size_is_known() -> None:
    """Every file of the folder but the Python one (configuration_phi3.py, which ONNX Runtime
    GenAI does not read), each with its bytes and SHA-256: the list can judge its fit."""
    phi4 = find_entry(load_catalog(), "phi-4-mini-instruct-onnx-cpu-int4")
    assert phi4 is not None and phi4.format == "onnx" and not phi4.recommended and phi4.capabilities == ()
    assert phi4.revision == "fc04c8f93df696602fd9f300a30d1bf2e3081347"
    folder = "cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4/"
    assert all(f.path.startswith(folder) and f.sha256 and f.size for f in phi4.files)
    assert sorted(f.path[len(folder):] for f in phi4.files) == [
        "added_tokens.json", "config.json", "genai_config.json", "merges.txt", "model.onnx",
        "model.onnx.data", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.json"]
    sizes = {f.path[len(folder):]: (f.size, (f.sha256 or "")[:8]) for f in phi4.files}
    assert sizes["model.onnx.data"] == (4856573952, "cb0267fa") and sizes["model.onnx"] == (52118230, "701aa5d1")
    assert sizes["tokenizer_config.json"] == (2960, "c565326a")
    assert sizes["special_tokens_map.json"] == (587, "aff38493")
    assert phi4.size == 4930552755 == sum(size for size, _ in sizes.values())
    assert phi4.shape == CatalogShape(32, 8, 128, 3072, 200064) and phi4.context_length == 131072


def test_the_shipped_vision_entry_names_its_projector_with_its_bytes_and_checksum() -> None:
    """Gemma 3 4B sees images through mmproj-model-f16.gguf, downloaded beside it from the same
    pinned revision; the projector is stated as {path, sha256, size} (read by the library)."""
    raw = next(m for m in json.loads(CATALOG_FILE.read_text(encoding="utf-8"))["models"]
               if m["id"] == "gemma-3-4b-it-q4_k_m")
    assert raw["projector"] == {"path": "mmproj-model-f16.gguf", "size": 851251104,
                                "sha256": "8c0fb064b019a6972856aaae2c7e4792858af3ca4561be2dbf649123ba6c40cb"}
    gemma = find_entry(load_catalog(), "gemma-3-4b-it-q4_k_m")
    assert gemma is not None and gemma.capabilities == ("vision",) and not gemma.recommended
    assert gemma.revision == "d0976223747697cb51e056d85c532013931fe52e" and gemma.context_length == 131072
    assert gemma.files == (CatalogFile("gemma-3-4b-it-Q4_K_M.gguf",
                                       "882e8d2db44dc554fb0ea5077cb7e4bc49e7342a1f0da57901c0802ea21a0863",
                                       2489757856),)
    # Gemma 3: five of every six of its 34 layers look back only 1,024 tokens.
    assert gemma.shape == CatalogShape(34, 4, 256, 2560, 262208, 1024, 29)


def test_the_shipped_catalog_has_a_recommended_model_per_tier_with_a_thinking_switch() -> None:
    entries = load_catalog()
    recommended = [e for e in entries if e.recommended]
    assert [e.id for e in recommended] == ["qwen3-4b-q4_k_m", "qwen3-8b-q4_k_m", "qwen3-14b-q4_k_m",
                                           "qwen3-30b-a3b-q4_k_m"]
    assert all(e.capabilities == ("tools", "reasoning") and e.context_length == 32768 for e in recommended)
    assert [e.size for e in recommended] == sorted(e.size or 0 for e in recommended)
    four_b = recommended[0]
    assert four_b.files == (CatalogFile("Qwen3-4B-Q4_K_M.gguf",
                                        "7485fe6f11af29433bc51cab58009521f205840f5b4ae3a32fa7f92e8534fdf5",
                                        2497280256),)
    coders = [e for e in entries if "coder" in e.id]
    assert [(e.id, e.size) for e in coders] == [("qwen2.5-coder-1.5b-instruct-q4_k_m", 1117320768),
                                                ("qwen2.5-coder-0.5b-instruct-q4_k_m", 491400064)]


def good(**changes: object) -> dict:
    entry = {"id": "m", "name": "M", "publisher": "P", "license": "mit", "parameters": "1B",
             "quantization": "Q4_K_M", "format": "gguf", "context_length": 4096, "repo": "o/m",
             "revision": "main", "files": [{"path": "m.gguf", "size": 10}], "instruct": True,
             "recommended": False, "description": "d"}
    entry.update(changes)
    return entry


def test_a_damaged_entry_is_skipped_with_its_reason(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"version": 1, "models": [
        good(),
        good(id="no-name", name=""),
        good(id="bad-format", format="safetensors"),
        good(id="bad-sha", files=[{"path": "m.gguf", "sha256": "xyz"}]),
        good(id="escape", files=[{"path": "../m.gguf"}]),
        good(id="onnx-without-config", format="onnx", files=[{"path": "f/model.onnx"}]),
        good(id="bad-context", context_length=-1),
        good(),  # the same id again
        "not an object",
    ]}))
    problems: list[str] = []

    entries = load_catalog(catalog, problems)

    assert [e.id for e in entries] == ["m"] and entries[0].size == 10
    assert entries[0].files == (CatalogFile("m.gguf", None, 10),)
    assert problems == [
        "Catalog entry 2 was skipped: name is missing or empty.",
        "Catalog entry 3 was skipped: format 'safetensors' is neither \"gguf\" nor \"onnx\".",
        "Catalog entry 4 was skipped: the SHA-256 of m.gguf is not 64 hexadecimal digits.",
        "Catalog entry 5 was skipped: the file path '../m.gguf' is not a plain relative path.",
        "Catalog entry 6 was skipped: an ONNX entry lists no genai_config.json.",
        "Catalog entry 7 was skipped: context_length is not a positive whole number.",
        "Catalog entry 8 was skipped: the id 'm' is used twice.",
        "Catalog entry 9 was skipped: it is not an object.",
    ]


def test_an_unreadable_catalog_offers_nothing_and_says_why(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    catalog.write_text("{not json")
    problems: list[str] = []

    assert load_catalog(catalog, problems) == () and "could not be read" in problems[0]
    assert load_catalog(tmp_path / "missing.json", problems) == ()
    catalog.write_text(json.dumps({"version": 1}))
    assert load_catalog(catalog, problems) == () and "holds no list of models" in problems[-1]


def test_a_shape_is_read_and_a_damaged_one_only_drops_the_shape(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    full = {"layers": 26, "kv_heads": 1, "head_size": 256, "embedding_length": 1152,
            "vocab_size": 262144, "sliding_window": 512, "sliding_window_layers": 22}
    catalog.write_text(json.dumps({"version": 1, "models": [
        good(id="full", shape=full, shape_source="o/m config.json"),
        good(id="least", shape={"layers": 16, "kv_heads": 8, "head_size": 64}),
        good(id="none"),
        good(id="null", shape=None),
        good(id="no-layers", shape={"kv_heads": 8, "head_size": 64}),
        good(id="zero", shape={"layers": 16, "kv_heads": 0, "head_size": 64}),
        good(id="text", shape={"layers": "16", "kv_heads": 8, "head_size": 64}),
        good(id="flag", shape={"layers": 16, "kv_heads": True, "head_size": 64}),
        good(id="no-window", shape={"layers": 16, "kv_heads": 8, "head_size": 64,
                                    "sliding_window_layers": 4}),
        good(id="too-many", shape=dict(full, sliding_window_layers=27)),
        good(id="list", shape=[26, 1, 256]),
    ]}))
    problems: list[str] = []

    entries = {e.id: e for e in load_catalog(catalog, problems)}

    assert len(entries) == 11, "a damaged shape never costs the entry"
    assert entries["full"].shape == CatalogShape(26, 1, 256, 1152, 262144, 512, 22)
    assert entries["least"].shape == CatalogShape(16, 8, 64)
    assert [i for i, e in entries.items() if e.shape is None] == [
        "none", "null", "no-layers", "zero", "text", "flag", "no-window", "too-many", "list"]
    assert problems == [
        "Catalog entry 5 (no-layers): its shape was ignored: layers is missing.",
        "Catalog entry 6 (zero): its shape was ignored: kv_heads is not a positive whole number.",
        "Catalog entry 7 (text): its shape was ignored: layers is not a positive whole number.",
        "Catalog entry 8 (flag): its shape was ignored: kv_heads is not a positive whole number.",
        "Catalog entry 9 (no-window): its shape was ignored: sliding_window_layers needs a "
        "sliding_window and at most layers.",
        "Catalog entry 10 (too-many): its shape was ignored: sliding_window_layers needs a "
        "sliding_window and at most layers.",
        "Catalog entry 11 (list): its shape was ignored: it is not an object.",
    ]


def test_an_entry_says_what_it_can_do_beyond_chat_and_a_wrong_capability_is_named() -> None:
    from app.library.catalog import CatalogEntryError, parse_entry

    by_id = {e.id: e for e in load_catalog()}
    assert by_id["qwen2.5-coder-1.5b-instruct-q4_k_m"].capabilities == ("tools",)
    assert by_id["qwen3-4b-q4_k_m"].capabilities == ("tools", "reasoning")
    # Granite 4.1's and Phi-4 mini's ONNX chat templates were not read: no tools claimed for them.
    assert by_id["granite-4.1-8b-q4_k_m"].capabilities == ()
    assert by_id["phi-4-mini-instruct-onnx-cpu-int4"].capabilities == ()
    assert by_id["gemma-3-4b-it-q4_k_m"].capabilities == ("vision",)
    assert by_id["gpt-oss-20b-mxfp4"].capabilities == ("tools", "reasoning")
    # SmolLM3's template has the thinking switch; its tools come in xml_tools, not tools.
    assert by_id["smollm3-3b-q4_k_m"].capabilities == ("reasoning",)
    raw = json.loads(CATALOG_FILE.read_text(encoding="utf-8"))["models"][0]
    assert parse_entry({**raw, "capabilities": ["reasoning", "vision"]}).capabilities == ("vision", "reasoning")
    with pytest.raises(CatalogEntryError, match="capabilities must be a list of vision, tools, reasoning"):
        parse_entry({**raw, "capabilities": ["telepathy"]})


def test_an_entry_says_its_purpose_and_one_that_cannot_chat_is_never_offered_as_chat(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    embedding = {"instruct": False, "purpose": "embedding"}
    catalog.write_text(json.dumps({"version": 1, "models": [
        good(id="chat"),
        good(id="said-chat", purpose="chat"),
        good(id="embed", **embedding),
        good(id="rerank", instruct=False, purpose="rerank"),
        good(id="telepathy", purpose="telepathy"),
        good(id="embed-instruct", purpose="embedding"),
        good(id="embed-recommended", recommended=True, **embedding),
        good(id="embed-tools", capabilities=["tools"], **embedding),
        good(id="embed-onnx", format="onnx", files=[{"path": "f/genai_config.json"}], **embedding),
    ]}))
    problems: list[str] = []

    entries = load_catalog(catalog, problems)

    assert [(e.id, e.purpose) for e in entries] == [
        ("chat", ModelPurpose.CHAT), ("said-chat", ModelPurpose.CHAT), ("embed", ModelPurpose.EMBEDDING),
        ("rerank", ModelPurpose.RERANK)]
    assert [e.id for e in embedding_entries(entries)] == ["embed"]
    assert problems == [
        "Catalog entry 5 was skipped: purpose 'telepathy' is not one of chat, embedding, rerank.",
        *(f"Catalog entry {n} was skipped: its purpose is embedding: a model that cannot chat is never "
          "instruct, recommended or given chat capabilities." for n in (6, 7, 8)),
        "Catalog entry 9 was skipped: its purpose is embedding: a model that cannot chat must be a GGUF.",
    ]
