"""What a model's files say about it, read without loading it: for `models info` now,
and for the model manager's details later."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from app.library.model_files.gguf_info import GgufInfo, read_gguf_info
from app.library.model_files.model_format import GENAI_CONFIG, OnnxFolderInfo, detect_format, read_onnx_folder
from app.library.model_files.model_purpose import ModelPurpose, gguf_purpose
from app.library.models import size_on_disk

# general.file_type: the quantization llama.cpp's quantizer wrote (LlamaFileType in
# gguf-py). 4-6 and 33-35 were formats llama.cpp has dropped; 1024 means "not stated".
_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
    29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
    38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0",
}
_FILE_TYPE_NOT_STATED = 1024


def model_details(path: Path, projector: Path | None = None,
                  missing_projector: Path | None = None) -> dict[str, Any]:
    """The details of a GGUF file or an ONNX folder; ModelFileError if it is not a model.
    Keys whose value the files do not state are None.

    An installed model passes its projector (InstalledModel.projector): it then sees, so
    "vision" joins its capabilities and "projector" names the file; missing_projector
    (InstalledModel.missing_projector) is said as "projector_missing".
    """
    if detect_format(path) != "gguf":
        return onnx_details(read_onnx_folder(path))
    details = gguf_details(read_gguf_info(path))
    if projector is not None and details["purpose"] == ModelPurpose.CHAT.value:
        details["capabilities"] = ["vision", *details["capabilities"]]
        details["projector"] = str(projector)
    if missing_projector is not None:
        details["projector_missing"] = (f"The vision projector {missing_projector} is not there now, so "
                                        "the model reads text only. Put the file back (or reconnect "
                                        "its drive) to give it sight again.")
    return details


def gguf_details(info: GgufInfo) -> dict[str, Any]:
    """What a GGUF header says: its settings, and the weights its tensors hold."""
    def text(key: str) -> str | None:
        value = info.metadata.get(key)
        return value if isinstance(value, str) and value else None

    return {
        "name": info.name, "format": "gguf", "gguf_version": info.version,
        "architecture": info.architecture, "parameters": info.parameter_count or None,
        "parameters_label": text("general.size_label"),
        "quantization": _quantization(info.metadata.get("general.file_type")),
        "file_size": info.file_size, "layers": info.block_count,
        "context_length": info.context_length, "embedding_length": info.embedding_length,
        "attention_heads": info.head_count, "kv_heads": info.head_count_kv,
        # Present even when too long to keep in memory (then only its length is read).
        "chat_template": "tokenizer.chat_template" in info.metadata,
        "purpose": gguf_purpose(info).value,
        "capabilities": gguf_capabilities(info),
        "license": text("general.license") or text("general.license.name"),
        "license_link": text("general.license.link"),
    }


# A chat template that renders the request's tools names them; one that writes a model's
# thinking knows its tags or switch. Read from the template text, as the engine does.
_TOOLS = re.compile(r"\btools\b")
_REASONING = re.compile(r"<think>|enable_thinking|<\|channel\|>analysis")


def gguf_capabilities(info: GgufInfo) -> list[str]:
    """"embedding" for an embedding model (its template, if any, is not for chat), else the template's."""
    purpose = gguf_purpose(info)
    if purpose is ModelPurpose.EMBEDDING:
        return ["embedding"]
    return template_capabilities(info.chat_template) if purpose is ModelPurpose.CHAT else []


def template_capabilities(template: str | None) -> list[str]:
    """What a chat template shows the model can do beyond chat: "tools", "reasoning".

    Vision is not read here: it comes from a projector file paired with the model
    (model_details' projector), not from the template.
    """
    if not template:
        return []
    found = [("tools", _TOOLS), ("reasoning", _REASONING)]
    return [name for name, pattern in found if pattern.search(template)]


def _quantization(file_type: object) -> str | None:
    if type(file_type) is not int or file_type == _FILE_TYPE_NOT_STATED:
        return None
    return _FILE_TYPES.get(file_type, f"file type {file_type}")


def onnx_details(info: OnnxFolderInfo) -> dict[str, Any]:
    """What genai_config.json, the tokenizer and the model card say; ONNX states no
    parameter count or quantization there, so those are left out."""
    return {
        "format": "onnx", "architecture": info.model_type,
        "file_size": size_on_disk(info.path),
        "layers": info.num_layers, "context_length": info.context_length,
        "kv_heads": info.num_kv_heads, "head_size": info.head_size, "vocab_size": info.vocab_size,
        "chat_template": info.chat_template is not None, "license": _model_card_license(info.path),
        "capabilities": template_capabilities(info.chat_template),
        "decoder_file": info.decoder_file.name, "providers": _onnx_providers(info.path),
    }


def _onnx_providers(folder: Path) -> list[str]:
    """The execution providers genai_config.json names (cuda, dml…); none means the CPU."""
    try:
        config = json.loads((folder / GENAI_CONFIG).read_text(encoding="utf-8"))
        options = config["model"]["decoder"]["session_options"]["provider_options"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if not isinstance(options, list):
        return []
    return [name for entry in options if isinstance(entry, dict) for name in entry]


def _model_card_license(folder: Path) -> str | None:
    """The licence a Hugging Face model card (README.md) states in its front matter."""
    try:
        with (folder / "README.md").open("rb") as card:
            lines = card.read(64 * 1024).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    if not lines or lines[0].strip() != "---":
        return None
    for line in lines[1:]:
        if line.strip() == "---":
            break
        key, _, value = line.partition(":")
        if key.strip() == "license" and value.strip():
            return value.strip().strip("'\"")
    return None


