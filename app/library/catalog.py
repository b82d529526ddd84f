"""The curated catalog of models Kestrel offers to download (resources/catalog.json)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from app.core.resources import resource_path
from app.library.model_files.model_purpose import ModelPurpose, recorded_purpose

CATALOG_VERSION = 1
CATALOG_FILE = resource_path("catalog.json")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
# What a model can do beyond plain chat, in the order a model card tags them.
CAPABILITIES = ("vision", "tools", "reasoning")
_TEXT_FIELDS = ("id", "name", "publisher", "license", "parameters", "quantization", "repo",
                "revision", "description")


@dataclass(frozen=True)
class CatalogFile:
    """One file of a catalog model: its path in the repository, and its SHA-256 and size
    where a source states them (None: the server's X-Linked-Etag / X-Linked-Size decide)."""

    path: str
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class CatalogShape:
    """The architecture numbers a memory estimate needs, from the original model's config.json:
    the KV cache grows by 2 x layers x kv_heads x head_size per token, and with a sliding window
    only the sliding_window_layers stop growing past sliding_window tokens. head_count: the
    query heads, where embedding_length / head_size is not their count (gpt-oss: 2,880 / 64 is
    45, it has 64)."""

    layers: int
    kv_heads: int
    head_size: int
    embedding_length: int | None = None
    vocab_size: int | None = None
    sliding_window: int | None = None
    sliding_window_layers: int | None = None
    head_count: int | None = None


@dataclass(frozen=True)
class CatalogSampling:
    """The sampling a model's authors recommend (their generation_config.json or model card),
    with where that was read: a new chat with the model starts from these. A value left out
    is one the source does not give, and the app's setting stands for it."""

    source: str
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    repeat_penalty: float | None = None
    min_p: float | None = None


@dataclass(frozen=True)
class CatalogEntry:
    """A model the catalog offers; size is the sum of its files' sizes, None if one is unknown."""

    id: str
    name: str
    publisher: str
    license: str
    parameters: str
    quantization: str
    format: Literal["gguf", "onnx"]
    context_length: int
    size: int | None
    repo: str
    revision: str
    files: tuple[CatalogFile, ...]
    instruct: bool
    recommended: bool
    description: str
    # Optional: an entry without verified numbers is still offered, only not estimated as closely.
    shape: CatalogShape | None = None
    # What the model can do beyond chat, as its publisher's template and card show it
    # (tools, reasoning, vision); empty when the catalog does not say.
    capabilities: tuple[str, ...] = ()
    # Chat, or an embedding model offered to document search (never to chat, never first-run).
    purpose: ModelPurpose = ModelPurpose.CHAT
    # The vision projector (mmproj GGUF) downloaded with a GGUF model; its bytes are in size.
    projector: CatalogFile | None = None
    # The authors' recommended sampling with its source; None where it could not be verified.
    sampling: CatalogSampling | None = None


class CatalogEntryError(ValueError):
    """An entry of the catalog that cannot be offered; str() says why."""


def load_catalog(path: Path | None = None, problems: list[str] | None = None) -> tuple[CatalogEntry, ...]:
    """The catalog's entries in its order; a damaged entry (or file) is skipped, said in problems."""
    path = path or CATALOG_FILE
    said = problems if problems is not None else []
    data = catalog_data(path, said, "model")
    if data is None or not isinstance(data.get("models"), list):
        if data is not None:
            said.append(f"The model catalog {path} holds no list of models; no model is offered.")
        return ()
    if data.get("version") != CATALOG_VERSION:
        said.append(f"The model catalog {path} is version {data.get('version')!r}, not "
                    f"{CATALOG_VERSION}; entries Kestrel cannot read are skipped.")
    entries: list[CatalogEntry] = []
    for index, raw in enumerate(data["models"]):
        minor: list[str] = []
        try:
            entry = parse_entry(raw, minor)
        except CatalogEntryError as exc:
            said.append(f"Catalog entry {index + 1} was skipped: {exc}.")
            continue
        if any(e.id == entry.id for e in entries):
            said.append(f"Catalog entry {index + 1} was skipped: the id {entry.id!r} is used twice.")
            continue
        said.extend(f"Catalog entry {index + 1} ({entry.id}): {m}." for m in minor)
        entries.append(entry)
    return tuple(entries)


def catalog_data(path: Path, problems: list[str], offered: str) -> dict[str, Any] | None:
    """The catalog file's object, or None with why in problems (offered: what goes unoffered, "model")."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"The model catalog {path} could not be read ({exc}); no {offered} is offered.")
        return None
    if not isinstance(data, dict):
        problems.append(f"The model catalog {path} holds no list of {offered}s; no {offered} is offered.")
        return None
    return data


def find_entry(entries: tuple[CatalogEntry, ...], entry_id: str) -> CatalogEntry | None:
    wanted = entry_id.strip().lower()
    return next((e for e in entries if e.id.lower() == wanted), None)


def recommended_entry(entries: tuple[CatalogEntry, ...]) -> CatalogEntry | None:
    """The model the first run offers: the one marked recommended."""
    return next((e for e in entries if e.recommended), None)


def embedding_entries(entries: tuple[CatalogEntry, ...]) -> tuple[CatalogEntry, ...]:
    """The embedding models the catalog offers to document search, in its order."""
    return tuple(e for e in entries if e.purpose is ModelPurpose.EMBEDDING)


def parse_entry(raw: Any, problems: list[str] | None = None) -> CatalogEntry:
    """One entry from its JSON; CatalogEntryError naming the first thing wrong. A damaged shape
    only drops the shape (said in problems): the model itself is still fine to offer."""
    if not isinstance(raw, dict):
        raise CatalogEntryError("it is not an object")
    text = {name: text_field(raw, name) for name in _TEXT_FIELDS}
    if not HF_REPO.match(text["repo"]):
        raise CatalogEntryError(f"repo {text['repo']!r} is not a Hugging Face owner/name")
    fmt = raw.get("format")
    if fmt not in ("gguf", "onnx"):
        raise CatalogEntryError(f"format {fmt!r} is neither \"gguf\" nor \"onnx\"")
    context = raw.get("context_length")
    if not isinstance(context, int) or isinstance(context, bool) or context <= 0:
        raise CatalogEntryError("context_length is not a positive whole number")
    files = tuple(catalog_file(item) for item in list_field(raw, "files"))
    if not files:
        raise CatalogEntryError("it lists no files")
    if fmt == "gguf" and not all(f.path.lower().endswith(".gguf") for f in files):
        raise CatalogEntryError("a GGUF entry lists a file that is not .gguf")
    if fmt == "onnx" and not any(PurePosixPath(f.path).name == "genai_config.json" for f in files):
        raise CatalogEntryError("an ONNX entry lists no genai_config.json")
    projector = _projector(raw.get("projector"), fmt, files)
    sizes = [f.size for f in (*files, *((projector,) if projector is not None else ()))]
    size = None if None in sizes else sum(s for s in sizes if s is not None)
    shape: CatalogShape | None = None
    try:
        shape = _shape(raw.get("shape"))
    except CatalogEntryError as exc:
        if problems is not None:
            problems.append(f"its shape was ignored: {exc}")
    entry = CatalogEntry(text["id"], text["name"], text["publisher"], text["license"],
                         text["parameters"], text["quantization"], fmt, context, size,
                         text["repo"], text["revision"], files, flag_field(raw, "instruct"),
                         flag_field(raw, "recommended"), text["description"], shape,
                         _capabilities(raw, vision=projector is not None), _purpose(raw), projector,
                         parse_sampling(raw.get("sampling"), raw.get("sampling_source")))
    _check_purpose(entry)
    return entry


# Each sampling value: its kind and its bounds, the same as a chat's settings allow (min_p: 0 to 1).
_SAMPLING_RANGES: dict[str, tuple[type, float, float, bool]] = {
    "temperature": (float, 0.0, 5.0, False), "top_p": (float, 0.0, 1.0, True),
    "top_k": (int, 0, 1_000_000, False), "repeat_penalty": (float, 0.5, 3.0, False),
    "min_p": (float, 0.0, 1.0, False)}


def parse_sampling(raw: Any, source: Any) -> CatalogSampling | None:
    """An entry's "sampling" {temperature, top_p, top_k, repeat_penalty, min_p?} and its
    "sampling_source"; None when the entry has neither. CatalogEntryError names what is wrong:
    a value out of range, an unknown key, or values without the source they come from."""
    if raw is None:
        if source is not None:
            raise CatalogEntryError("sampling_source is given without a sampling")
        return None
    if not isinstance(raw, dict) or not raw:
        raise CatalogEntryError("sampling must be an object of temperature, top_p, top_k, "
                                "repeat_penalty and min_p")
    unknown = sorted(set(raw) - set(_SAMPLING_RANGES))
    if unknown:
        raise CatalogEntryError(f"sampling has {', '.join(map(repr, unknown))}, which Kestrel does "
                                f"not know; it takes {', '.join(_SAMPLING_RANGES)}")
    if not isinstance(source, str) or not source.strip():
        raise CatalogEntryError("sampling has no sampling_source: say where the values were read")
    values: dict[str, Any] = {name: _sampling_value(name, value) for name, value in raw.items()}
    return CatalogSampling(source.strip(), **values)


def _sampling_value(name: str, value: Any) -> float | int:
    kind, low, high, low_open = _SAMPLING_RANGES[name]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    whole = kind is not int or isinstance(value, int)
    inside = number and (low < value if low_open else low <= value) and value <= high
    if not (number and whole and inside):
        words = ("a whole number, 0 or more" if kind is int else
                 f"a number {'above' if low_open else 'from'} {low:g} {'and at most' if low_open else 'to'} {high:g}")
        raise CatalogEntryError(f"sampling {name} must be {words} (got {value!r})")
    return int(value) if kind is int else float(value)


def _purpose(raw: dict[str, Any]) -> ModelPurpose:
    value = raw.get("purpose", ModelPurpose.CHAT.value)
    purpose = recorded_purpose(value)
    if purpose is None:
        raise CatalogEntryError(f"purpose {value!r} is not one of "
                                f"{', '.join(p.value for p in ModelPurpose)}")
    return purpose


def _check_purpose(entry: CatalogEntry) -> None:
    """A model that cannot chat is never the first-run offer nor an instruct model, and is a
    GGUF: the library tells a model's purpose from its GGUF header (an ONNX folder chats)."""
    if entry.purpose is ModelPurpose.CHAT:
        return
    if entry.format != "gguf":
        raise CatalogEntryError(f"its purpose is {entry.purpose.value}: a model that cannot chat "
                                "must be a GGUF")
    if entry.instruct or entry.recommended or entry.capabilities:
        raise CatalogEntryError(f"its purpose is {entry.purpose.value}: a model that cannot chat "
                                "is never instruct, recommended or given chat capabilities")


def _capabilities(raw: dict[str, Any], vision: bool = False) -> tuple[str, ...]:
    """What the entry says it can do; "vision" too when it brings a projector."""
    value = raw.get("capabilities", [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v in CAPABILITIES for v in value):
        raise CatalogEntryError(f"capabilities must be a list of {', '.join(CAPABILITIES)}")
    return tuple(v for v in CAPABILITIES if v in value or (vision and v == "vision"))


def _projector(raw: Any, fmt: str, files: tuple[CatalogFile, ...]) -> CatalogFile | None:
    """The optional "projector": {"path", "sha256", "size"} of a GGUF entry, checked as a file is."""
    if raw is None:
        return None
    if fmt != "gguf":
        raise CatalogEntryError("only a GGUF entry can have a vision projector")
    projector = catalog_file(raw)
    if not projector.path.lower().endswith(".gguf"):
        raise CatalogEntryError(f"the projector {projector.path!r} is not a .gguf file")
    if any(f.path == projector.path for f in files):
        raise CatalogEntryError(f"the projector {projector.path!r} is also listed as a model file")
    return projector


def text_field(raw: dict[str, Any], name: str) -> str:
    value = raw.get(name)
    if not isinstance(value, str) or not value.strip():
        raise CatalogEntryError(f"{name} is missing or empty")
    return value.strip()


def flag_field(raw: dict[str, Any], name: str) -> bool:
    value = raw.get(name, False)
    if not isinstance(value, bool):
        raise CatalogEntryError(f"{name} is not true or false")
    return value


def list_field(raw: dict[str, Any], name: str) -> list[Any]:
    value = raw.get(name)
    if not isinstance(value, list):
        raise CatalogEntryError(f"{name} is not a list")
    return value


def catalog_file(raw: Any) -> CatalogFile:
    if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
        raise CatalogEntryError("a file has no path")
    path = raw["path"]
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in path:
        raise CatalogEntryError(f"the file path {path!r} is not a plain relative path")
    sha256 = raw.get("sha256")
    if sha256 is not None and (not isinstance(sha256, str) or not _SHA256.match(sha256.lower())):
        raise CatalogEntryError(f"the SHA-256 of {path} is not 64 hexadecimal digits")
    size = raw.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size <= 0):
        raise CatalogEntryError(f"the size of {path} is not a positive whole number")
    return CatalogFile(path, sha256.lower() if sha256 else None, size)


def _shape(raw: Any) -> CatalogShape | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise CatalogEntryError("it is not an object")
    layers, kv_heads, head_size = (_count(raw, n, True) for n in ("layers", "kv_heads", "head_size"))
    window, windowed = _count(raw, "sliding_window"), _count(raw, "sliding_window_layers")
    assert layers is not None and kv_heads is not None and head_size is not None
    # A count of windowed layers means nothing without the window, and cannot exceed the layers.
    if windowed is not None and (window is None or windowed > layers):
        raise CatalogEntryError("sliding_window_layers needs a sliding_window and at most layers")
    return CatalogShape(layers, kv_heads, head_size, _count(raw, "embedding_length"),
                        _count(raw, "vocab_size"), window, windowed, _count(raw, "head_count"))


def _count(raw: dict[str, Any], name: str, required: bool = False) -> int | None:
    value = raw.get(name)
    if value is None and required:
        raise CatalogEntryError(f"{name} is missing")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
        raise CatalogEntryError(f"{name} is not a positive whole number")
    return value
