"""Vision projectors (llama.cpp's mmproj GGUFs): telling one from a model, and pairing one with its model.

A projector is a GGUF whose general.architecture is "clip": an image encoder whose output
the language model reads as tokens. It never chats on its own. llama.cpp (tools/mtmd)
refuses a projector whose output width differs from the model's input embedding width;
its current converter writes that width as clip.vision.projection_dim and marks the file
general.type "mmproj", so the library checks it against the model's {arch}.embedding_length
before pairing, when both are stated. Older (llava-era) converters wrote something else
under projection_dim and no general.type: for those files the width is left to libmtmd,
which checks it when the pair loads. This is the one rule; the engine asks it too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.library.model_files.gguf_info import GgufInfo, ModelFileError, read_gguf_info
from app.library.installed import InstalledModel

CLIP_ARCHITECTURE = "clip"
HAS_VISION = "clip.has_vision_encoder"
PROJECTION_DIM = "clip.vision.projection_dim"
# general.type of a projector from llama.cpp's current converter: the only kind whose
# projection_dim is the width the model must have.
MMPROJ_TYPE = "mmproj"
# What a repository calls its projector; a listing has no header to read, only names.
PROJECTOR_WORD = "mmproj"
# The precision a projector is best kept in: llama.cpp's own advice is F16; BF16 and F32
# work everywhere but cost more; a quantized projector loses detail in what it sees.
_PRECISIONS = ("f16", "bf16", "f32")
_FILE_TYPE_PRECISION = {1: "f16", 32: "bf16", 0: "f32"}
_WORD = re.compile(r"[a-z0-9]+")
# Words in a file name that say how it is stored, not which model it is.
_STORAGE_WORD = re.compile(r"^(?:gguf|mmproj|model|f16|bf16|f32|fp16|fp32|i?q\d\w*|k|m|s|l|xs|xxs)$")


@dataclass(frozen=True)
class Projector:
    """A vision projector file and what pairing needs of it (None: its header does not say)."""

    path: Path
    size: int
    projection_dim: int | None
    vision: bool
    precision: str | None = None   # "f16", "bf16", "f32", or None for quantized / not stated
    kind: str | None = None        # general.type: "mmproj" from current converters, None from older ones


def is_projector(info: GgufInfo) -> bool:
    """Whether a GGUF's header is a projector's (any name it has)."""
    return info.architecture == CLIP_ARCHITECTURE


def projector_of(info: GgufInfo) -> Projector | None:
    """The projector a header describes, or None when it is not one."""
    if not is_projector(info):
        return None
    dim = info.metadata.get(PROJECTION_DIM)
    file_type = info.metadata.get("general.file_type")
    precision = _FILE_TYPE_PRECISION.get(file_type) if type(file_type) is int else None
    kind = info.metadata.get("general.type")
    return Projector(info.path, info.file_size, dim if type(dim) is int and dim > 0 else None,
                     info.metadata.get(HAS_VISION) is True, precision or _named_precision(info.path.name),
                     kind if isinstance(kind, str) else None)


def not_a_model(path: Path) -> ModelFileError:
    """What adding (or importing, or loading to chat) a projector on its own says."""
    return ModelFileError("projector", path, (
        f"{path.name} is a vision projector, not a model: it lets a model read images. Put it beside "
        "its model (in the same folder) and add the model; Kestrel pairs the two."
    ))


def read_projector(path: Path) -> Projector | None:
    """The projector at path, or None when the file is not one (or cannot be read). Headers
    are remembered while the file is unchanged: every model in a folder asks of the same files."""
    try:
        status = path.stat()
    except OSError:
        return None
    key = (str(path), status.st_size, status.st_mtime_ns)
    if key not in _READ:
        try:
            _READ[key] = projector_of(read_gguf_info(path))
        except (ModelFileError, OSError):
            _READ[key] = None
    return _READ[key]


_READ: dict[tuple[str, int, int], Projector | None] = {}


def fits(projector: Projector, embedding_length: int | None) -> bool:
    """Whether the projector holds an image encoder at all, and can feed a model of that
    embedding width: widths are compared only for an mmproj-type file (an older file's
    projection_dim means something else; libmtmd checks it on loading), and a width
    either file leaves unstated is not held against it."""
    if not projector.vision:
        return False
    return projector.kind != MMPROJ_TYPE or projector.projection_dim is None or \
        embedding_length is None or projector.projection_dim == embedding_length


def projector_beside(model: GgufInfo, own_files: Iterable[Path] = ()) -> Projector | None:
    """The projector for the model from the GGUFs in its folder (own_files, a split model's
    parts, are never one): the one that fits, or by name and precision among several that
    fit (best_name). None when none fits: the model is then text only."""
    skip = {p.name for p in (model.path, *own_files)}
    try:
        names = sorted(p for p in model.path.parent.iterdir()
                       if p.name.lower().endswith(".gguf") and p.name not in skip and not p.name.startswith("."))
    except OSError:
        return None
    found = [p for p in (read_projector(path) for path in names if path.is_file()) if p is not None]
    fitting = {p.path.name: p for p in found if fits(p, model.embedding_length)}
    best = best_name(list(fitting), model.path.name, {n: p.precision for n, p in fitting.items()})
    return fitting[best] if best is not None else None


def best_name(names: list[str], model_name: str, precisions: dict[str, str | None] | None = None) -> str | None:
    """Among projector file names, the one to pair with the model: the only one; else one
    whose name holds the model's own name, then F16 over BF16 over F32 over quantized,
    then the first by name. precisions, from headers, win over what a name says."""
    if not names:
        return None
    wanted = _model_words(model_name)

    def rank(name: str) -> tuple[int, int, str]:
        words = set(_WORD.findall(name.lower()))
        shares = bool(wanted) and wanted <= words
        precision = (precisions or {}).get(name) or _named_precision(name)
        order = _PRECISIONS.index(precision) if precision in _PRECISIONS else len(_PRECISIONS)
        return (0 if shares else 1, order, name)

    return min(names, key=rank)


def looks_like_projector(name: str) -> bool:
    """A repository file that is a projector by its name (a listing has no header to read)."""
    lowered = name.lower()
    return lowered.endswith(".gguf") and PROJECTOR_WORD in lowered


def _model_words(name: str) -> set[str]:
    """The words that name the model in its file name, without how it is stored."""
    stem = name[:-5] if name.lower().endswith(".gguf") else name
    stem = re.sub(r"-\d{5}-of-\d{5}$", "", stem)  # a split model's part number names no model
    return {w for w in _WORD.findall(stem.lower()) if not _STORAGE_WORD.match(w)}


def _named_precision(name: str) -> str | None:
    words = set(_WORD.findall(name.lower()))
    if "fp16" in words:
        words.add("f16")
    if "fp32" in words:
        words.add("f32")
    return next((p for p in _PRECISIONS if p in words), None)


def checked_projector(model: InstalledModel, path: Path) -> Path:
    """path, once it is known to be a projector that fits the model and sits where the
    model's record can keep it; ValueError in words saying what to do otherwise."""
    if model.format != "gguf":
        raise ValueError(f"{model.title} is an ONNX model: only a GGUF model takes a vision projector.")
    found = read_projector(path)
    if found is None:
        raise ValueError(f"{path.name} is not a vision projector (an mmproj GGUF file), or it could "
                         "not be read. Choose the projector file that came with the model.")
    if not found.vision:
        raise ValueError(f"{path.name} is a projector without an image encoder (an audio one?): it "
                         "cannot give the model sight. Choose the model's vision projector.")
    try:
        width = read_gguf_info(model.path).embedding_length
    except (ModelFileError, OSError):
        width = None  # a missing model is paired all the same; loading it says what is wrong
    if not fits(found, width):
        raise ValueError(f"{path.name} is made for a model {found.projection_dim:,} numbers wide, and "
                         f"{model.title} is {width:,}: it belongs to another model. Choose the "
                         "projector from this model's own download.")
    if not model.referenced and path.parent != model.path.parent:
        raise ValueError(f"{path.name} is not in {model.title}'s folder ({model.path.parent}). Copy "
                         "it there first: a model Kestrel keeps brings its projector with it.")
    return path
