"""Tells a GGUF file from an ONNX Runtime GenAI model folder, and reads what such a folder says."""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.library.model_files.gguf_info import GGUF_MAGIC, ModelFileError, checked_path

ModelFormat = Literal["gguf", "onnx"]
MODEL_FORMATS: tuple[ModelFormat, ...] = ("gguf", "onnx")
ModelFolderErrorKind = Literal[
    "missing", "not_a_file", "unreadable", "unknown_format", "no_config", "bad_config",
    "no_weights", "no_tokenizer", "bad_tokenizer",
]

GENAI_CONFIG = "genai_config.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
# ONNX Runtime GenAI reads a Hugging Face tokenizer.json; a few older exports carry only
# SentencePiece's tokenizer.model.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")
# Where a chat template may live, in the order transformers prefers them.
_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
# The JSON files ONNX Runtime GenAI or its tokenizer may read, and the kind of error a
# damaged one is.
_JSON_FILES: tuple[tuple[str, ModelFolderErrorKind], ...] = (
    (GENAI_CONFIG, "bad_config"),
    ("tokenizer.json", "bad_tokenizer"),
    (TOKENIZER_CONFIG, "bad_tokenizer"),
    ("special_tokens_map.json", "bad_tokenizer"),
    ("added_tokens.json", "bad_tokenizer"),
    ("chat_template.json", "bad_tokenizer"),
)


class ModelFolderError(ModelFileError):
    """A path that holds no model Kestrel can run, or an ONNX model folder with a part
    missing or broken; kind says which, the message says what to do.

    A ModelFileError, so whatever already reports a bad model file reports this too.
    """

    def __init__(self, kind: ModelFolderErrorKind, path: Path, message: str) -> None:
        super().__init__(kind, path, message)  # type: ignore[arg-type]


@dataclass(frozen=True)
class OnnxFolderInfo:
    """What an ONNX Runtime GenAI model folder says about its model."""

    path: Path
    model_type: str
    context_length: int
    decoder_file: Path
    weights_bytes: int
    num_layers: int | None
    num_kv_heads: int | None
    head_size: int | None
    vocab_size: int | None
    eos_token_ids: tuple[int, ...]
    chat_template: str | None
    bos_token: str
    eos_token: str


def detect_format(path: Path | str) -> ModelFormat:
    """"gguf" for a GGUF file, "onnx" for a folder with genai_config.json; else ModelFolderError."""
    path = Path(path)
    # Only a regular file is ever opened: a named pipe would wait for a writer for ever.
    status = checked_path(path, "model", ModelFolderError)
    try:
        if stat.S_ISDIR(status.st_mode):
            return _folder_format(path)
        if path.suffix.lower() == ".gguf":
            return "gguf"
        with path.open("rb") as file:
            head = file.read(len(GGUF_MAGIC))
    except OSError as error:
        raise _unreadable(path, error) from None
    if head == GGUF_MAGIC:
        return "gguf"
    raise ModelFolderError("unknown_format", path, _file_hint(path))


def format_at(path: Path) -> ModelFormat:
    """The format of a path already taken for a model, without opening it: a folder is an
    ONNX GenAI model, a file a GGUF one, and a path not there now (an unplugged drive) is
    judged by its name. detect_format is the check for a path not yet known to be a model."""
    if path.is_dir():
        return "onnx"
    if path.exists() or path.suffix.lower() == ".gguf":
        return "gguf"
    return "onnx"


def _folder_format(path: Path) -> ModelFormat:
    if (path / GENAI_CONFIG).is_file():
        return "onnx"
    names = [child.name.lower() for child in path.iterdir()]
    if any(name.endswith(".onnx") for name in names):
        raise ModelFolderError("no_config", path, (
            f'The folder "{path.name}" holds an ONNX model but no {GENAI_CONFIG}, which says how '
            "to run it: it is not in the ONNX Runtime GenAI layout, or the download is "
            "incomplete. Download the model's ONNX Runtime GenAI version, or its GGUF file."
        ))
    if any(name.endswith(".gguf") for name in names):
        hint = "It holds GGUF files: choose the .gguf file itself."
    else:
        hint = (f"A model is either a .gguf file or a folder with {GENAI_CONFIG}, the model and "
                "its tokenizer (the ONNX Runtime GenAI layout).")
    raise ModelFolderError("unknown_format", path,
                           f'The folder "{path.name}" is not a model Kestrel can run. {hint}')


def _file_hint(path: Path) -> str:
    if path.name == GENAI_CONFIG or path.suffix.lower() in (".onnx", ".data"):
        return (f'"{path.name}" is one part of an ONNX model. Choose the folder that holds it '
                f"(the one with {GENAI_CONFIG}).")
    return (f'"{path.name}" is not a model Kestrel can run. Choose a .gguf file, or a folder '
            f"with an ONNX Runtime GenAI model ({GENAI_CONFIG}, model.onnx and the tokenizer).")


def check_not_text(path: Path) -> None:
    """ModelFileError if a file chosen as a GGUF model holds text instead (a saved web page,
    an error message, a Git LFS pointer), saying what it holds and what to do; the name
    ending in .gguf says nothing about what is inside. A file that is not text is left to
    the GGUF reader, whose messages cover the rest."""
    try:
        with path.open("rb") as file:
            head = file.read(_TEXT_SNIFF_BYTES)
    except OSError:
        return  # the GGUF reader says why it cannot be read
    if head[:4] == GGUF_MAGIC or not _looks_like_text(head):
        return
    raise ModelFileError("not_gguf", path, (
        f'"{path.name}" is not a GGUF model file: it holds text ({_what_text(head)}), though its '
        'name ends in .gguf. A GGUF model is a large binary file that starts with the letters "GGUF". '
        "If it came from a download, the site sent this text instead of the model: download the "
        ".gguf file again from the model's page. Otherwise choose the model file itself."
    ))


# Enough of a file's start to tell text from a model's binary header.
_TEXT_SNIFF_BYTES = 4096


def _looks_like_text(head: bytes) -> bool:
    if not head.strip() or b"\x00" in head:
        return False
    text = head.decode("utf-8", errors="ignore")
    printable = sum(ch.isprintable() or ch in "\r\n\t" for ch in text)
    # The last character may be cut in two by the read: a few undecodable bytes are allowed.
    return len(head) - len(text.encode("utf-8")) <= 3 and printable >= 0.95 * len(text)


def _what_text(head: bytes) -> str:
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff \r\n\t")
    lowered = text[:200].lower()
    if lowered.startswith("version https://git-lfs"):
        return "a Git LFS pointer, which stands for the model in a repository but is not the model"
    if lowered.startswith(("<!doctype", "<html", "<?xml", "<")):
        return "a web page"
    if lowered.startswith(("{", "[")):
        return "JSON, such as an error message from a server"
    first = text.splitlines()[0].strip() if text.strip() else ""
    return f'it begins "{first[:60]}{"…" if len(first) > 60 else ""}"'


def read_onnx_folder(path: Path | str) -> OnnxFolderInfo:
    """Check that an ONNX Runtime GenAI folder is whole; raise ModelFolderError if it is not."""
    path = Path(path)
    if detect_format(path) != "onnx":
        raise ModelFolderError("unknown_format", path, (
            f'"{path.name}" is a GGUF model file, not an ONNX model folder.'
        ))
    try:
        return _read_folder(path)
    except OSError as error:
        raise _unreadable(path, error) from None


def _read_folder(path: Path) -> OnnxFolderInfo:
    config = _json_object(path / GENAI_CONFIG, "bad_config")
    model = config.get("model")
    decoder = model.get("decoder") if isinstance(model, dict) else None
    if not isinstance(model, dict) or not isinstance(decoder, dict):
        raise _bad_config(path, 'it has no "model" section with a "decoder"')
    model_type = model.get("type")
    context_length = model.get("context_length")
    if not isinstance(model_type, str) or not model_type:
        raise _bad_config(path, "it does not say which kind of model it is (model.type)")
    if type(context_length) is not int or context_length <= 0:
        raise _bad_config(path, "it gives no usable context length (model.context_length)")
    decoder_file = path / str(decoder.get("filename") or "model.onnx")
    if not decoder_file.is_file():
        raise ModelFolderError("no_weights", path, (
            f'The model folder "{path.name}" has no {decoder_file.name}, the model itself. The '
            "download or copy is incomplete; download the model again."
        ))
    tokenizer = _tokenizer_config(path)
    return OnnxFolderInfo(
        path=path,
        model_type=model_type,
        context_length=context_length,
        decoder_file=decoder_file,
        weights_bytes=_weights_bytes(path),
        num_layers=_int(decoder.get("num_hidden_layers")),
        num_kv_heads=_int(decoder.get("num_key_value_heads")) or _int(decoder.get("num_attention_heads")),
        head_size=_int(decoder.get("head_size")),
        vocab_size=_int(model.get("vocab_size")),
        eos_token_ids=_token_ids(model.get("eos_token_id")),
        chat_template=_chat_template(path, tokenizer),
        bos_token=_token_text(tokenizer.get("bos_token")),
        eos_token=_token_text(tokenizer.get("eos_token")),
    )


def _tokenizer_config(path: Path) -> dict[str, Any]:
    if not (path / TOKENIZER_CONFIG).is_file() or not any((path / n).is_file() for n in TOKENIZER_FILES):
        raise ModelFolderError("no_tokenizer", path, (
            f'The model folder "{path.name}" has no tokenizer ({TOKENIZER_CONFIG} and '
            f"{TOKENIZER_FILES[0]}), which turns text into the model's tokens. The download or "
            "copy is incomplete; download the model again."
        ))
    return _json_object(path / TOKENIZER_CONFIG, "bad_tokenizer")


def _json_object(file: Path, kind: ModelFolderErrorKind) -> dict[str, Any]:
    if not file.is_file():
        raise ModelFolderError("no_config", file.parent, (
            f'The model folder "{file.parent.name}" has no {file.name}, which says how to run '
            "the model. Download the model again, in its ONNX Runtime GenAI version."
        ))
    value, problem = _parsed_json(file)
    if isinstance(value, dict):
        return value
    raise _damaged(file, kind, problem or "it does not hold a JSON object")


def damaged_json_file(path: Path | str) -> ModelFolderError | None:
    """The first JSON file of an ONNX model folder that is not UTF-8 JSON, as the error to
    show; None if they all read.

    For after ONNX Runtime GenAI refused the folder: its own message for a damaged
    tokenizer.json is a bare UnicodeDecodeError or a JSON parser's position, naming no
    file. Reading a tokenizer (tens of MB) every time a model loads would cost too much.
    """
    folder = Path(path)
    for name, kind in _JSON_FILES:
        file = folder / name
        try:
            if not file.is_file():
                continue
            _, problem = _parsed_json(file)
        except OSError as error:
            return _unreadable(file, error)
        if problem:
            return _damaged(file, kind, problem)
    return None


def _parsed_json(file: Path) -> tuple[object, str | None]:
    """The file's JSON value, or None and why it is not JSON in plain words."""
    data = file.read_bytes()
    if not data.strip():
        return None, "it is empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, f"it is not UTF-8 text (at byte offset {error.start:,})"
    try:
        return json.loads(text), None
    except RecursionError:
        return None, "it is nested thousands of levels deep, which no real model file is"
    except json.JSONDecodeError as error:
        if error.pos >= len(text.rstrip()):
            return None, "it ends part-way through (cut short)"
        return None, f"it is not valid JSON (line {error.lineno:,}, column {error.colno:,})"


def _damaged(file: Path, kind: ModelFolderErrorKind, reason: str) -> ModelFolderError:
    return ModelFolderError(kind, file.parent, (
        f'The file {file.name} in the model folder "{file.parent.name}" is damaged: {reason}. '
        "Download the model again."
    ))


def _bad_config(path: Path, reason: str) -> ModelFolderError:
    return ModelFolderError("bad_config", path, (
        f'The file {GENAI_CONFIG} in the model folder "{path.name}" cannot be used: {reason}. '
        "Download the model again, or a version made for ONNX Runtime GenAI."
    ))


def _chat_template(path: Path, tokenizer: dict[str, Any]) -> str | None:
    jinja = path / _TEMPLATE_FILES[0]
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8", errors="replace") or None
    as_json = path / _TEMPLATE_FILES[1]
    if as_json.is_file():
        try:
            template = _named_template(json.loads(as_json.read_text(encoding="utf-8")).get("chat_template"))
        except (UnicodeDecodeError, json.JSONDecodeError, AttributeError, RecursionError):
            template = None
        if template:
            return template
    return _named_template(tokenizer.get("chat_template"))


def _named_template(value: object) -> str | None:
    """A template string, or the "default" one of a list of named templates."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        template = named.get("default")
        return template if isinstance(template, str) and template else None
    return None


def _token_text(value: object) -> str:
    # transformers writes a special token either as its text or as {"content": text, ...}.
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def _token_ids(value: object) -> tuple[int, ...]:
    if type(value) is int:
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if type(v) is int)
    return ()


def _int(value: object) -> int | None:
    return value if type(value) is int and value > 0 else None


def _weights_bytes(path: Path) -> int:
    return sum(child.stat().st_size for child in path.iterdir()
               if child.is_file() and child.suffix.lower() in (".onnx", ".data", ".onnx_data", ".bin"))


def _unreadable(path: Path, error: OSError) -> ModelFolderError:
    reason = error.strerror or str(error)
    return ModelFolderError("unreadable", path, (
        f"Kestrel could not read the model {path} ({reason}). Check that it is not locked by "
        "another program and that you may read it, then try again."
    ))
