"""Reading a model's model.json into an InstalledModel: its own files by name, a referenced model's by absolute path."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from app.library.installed import InstalledModel
from app.library.model_defaults import ModelDefaults
from app.library.model_files.model_format import GENAI_CONFIG, MODEL_FORMATS, ModelFormat, format_at
from app.library.model_files.model_purpose import ModelPurpose, purpose_at, recorded_purpose
from app.library.recommended_sampling import with_recommended


def read_own(folder: Path, data: dict[str, Any]) -> InstalledModel | None:
    path = folder / plain_name(data["path"])
    files = tuple(folder / plain_name(name) for name in list_of(data.get("files")))
    size = sum(size_on_disk(part) for part in (files or (path,)))
    if size != data.get("size"):
        return None  # the copy did not finish
    return model_from(folder, data, path, size, files=files,
                      **_projector(data.get("projector"), lambda name: folder / plain_name(name)))


def read_reference(folder: Path, data: dict[str, Any]) -> InstalledModel:
    path = absolute(data["path"])
    files = tuple(absolute(name) for name in list_of(data.get("files")))
    present = all(part.is_file() for part in files) and (path.is_file() or (path / GENAI_CONFIG).is_file())
    recorded = data.get("size")
    size = (sum(size_on_disk(part) for part in (files or (path,))) if present
            else recorded if isinstance(recorded, int) else 0)
    return model_from(folder, data, path, size, files=files, referenced=True, missing=not present,
                      **_projector(data.get("projector"), absolute))


def _projector(recorded: object, where: Callable[[object], Path]) -> dict[str, Path]:
    """The projector model.json names: paired when its file is there, else kept as missing
    (the model then runs text only, and pairs again once the file is back). A damaged
    entry is left out: the model itself is still fine."""
    if recorded is None:
        return {}
    try:
        path = where(recorded)
    except ValueError:
        return {}
    return {"projector": path} if path.is_file() else {"missing_projector": path}


def model_from(folder: Path, data: dict[str, Any], path: Path, size: int, **rest: Any) -> InstalledModel:
    """What model.json says besides where the model is; a value of the wrong kind is left
    out rather than losing the model."""
    title, sha256, source, added = (data.get(key) for key in ("title", "sha256", "source", "added"))
    fmt = _recorded_format(data.get("format"), path)
    return InstalledModel(
        folder.name, title if isinstance(title, str) and title else folder.name, path, size,
        sha256 if isinstance(sha256, str) else None, source if isinstance(source, str) else "",
        float(added) if isinstance(added, (int, float)) and not isinstance(added, bool) else 0.0,
        fmt, defaults=with_recommended(ModelDefaults.from_dict(data.get("defaults")),
                                       sha256 if isinstance(sha256, str) else None),
        purpose=recorded_purpose(data.get("purpose")) or _purpose_of_file(path, fmt), **rest)


def _purpose_of_file(path: Path, fmt: ModelFormat) -> ModelPurpose:
    """For a model.json written before it kept a purpose: read from the header, remembered
    while the file is unchanged, so listing the library reads each header once."""
    try:
        stat = path.stat()
    except OSError:
        return ModelPurpose.CHAT
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _PURPOSES:
        _PURPOSES[key] = purpose_at(path, fmt)
    return _PURPOSES[key]


_PURPOSES: dict[tuple[str, int, int], ModelPurpose] = {}


def _recorded_format(recorded: object, path: Path) -> ModelFormat:
    """The format model.json keeps; a model.json written before it kept one (or a value
    this Kestrel does not know) has it decided from the path, here, once per read."""
    for known in MODEL_FORMATS:
        if recorded == known:
            return known
    return format_at(path)


def list_of(value: object) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"not a list: {value!r}")
    return value


def absolute(text: object) -> Path:
    if not isinstance(text, str) or not Path(text).is_absolute():
        raise ValueError(f"not an absolute path: {text!r}")
    return Path(text)


def size_on_disk(path: Path) -> int:
    """A file's size, or the sum of the files in a model folder."""
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def plain_name(name: object) -> str:
    """A file name without a folder part: register() writes only such names, and one that
    leads out of the model's folder ("../x") must never be what remove() deletes."""
    if not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name:
        raise ValueError(f"not a file name: {name!r}")
    return name
