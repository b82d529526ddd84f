"""What a user pastes (a Hugging Face repository, a huggingface.co link, any http(s) URL)
turned into the downloadable units it offers. Nothing here opens a socket until called."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal
from urllib.parse import quote, unquote, urlsplit

from app.library.catalog import CatalogEntry
from app.library.huggingface.file_names import name_problem, plain_file_name, shown
from app.library.download.errors import DownloadError, bad_scheme
from app.library.download.transport import Steps, check_scheme
from app.library.download.unit import FileSpec
from app.library.huggingface.hub_listing import RepoFile, repo_files
from app.library.projector import best_name, looks_like_projector

DEFAULT_ENDPOINT = "https://huggingface.co"
GENAI_CONFIG = "genai_config.json"
_HF_HOSTS = ("huggingface.co", "www.huggingface.co", "hf.co")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_SHARD = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
_LISTING = "the repository's file list"  # a repository listing is JSON; a bigger answer is not one


@dataclass(frozen=True)
class DownloadUnit:
    """One thing to download as a whole: a GGUF file, a split GGUF's shards, an ONNX folder.

    key is what `--file` names (the file's or folder's path in the repository); source is
    the address recorded as "downloaded from …". projector names the file among files that
    is the model's vision projector (an mmproj GGUF fetched with it), None for text only.
    """

    key: str
    title: str
    # "speech": a catalog speech model or voice (app/voice/catalog/fetch.py), downloaded to the speech folder.
    format: Literal["gguf", "onnx", "speech"]
    files: tuple[FileSpec, ...]
    source: str
    catalog_id: str | None = None
    projector: str | None = None

    @property
    def size(self) -> int | None:
        sizes = [f.size for f in self.files]
        return None if None in sizes else sum(s for s in sizes if s is not None)

    @property
    def parts_words(self) -> str:
        """What a listing shows after the unit's name: " (3 files)" for a split model (its
        projector not counted) and " + NAME, which lets it read images (its vision projector)" when one comes with
        it."""
        model_files = len(self.files) - (1 if self.projector else 0)
        words = f" ({model_files} files)" if model_files > 1 else ""
        return words + (f" + {self.projector}, which lets it read images (its vision projector)" if self.projector else "")

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "format": self.format,
                "source": self.source, "catalog_id": self.catalog_id, "projector": self.projector,
                "files": [{"url": f.url, "name": f.name, "sha256": f.sha256, "size": f.size,
                           "stated_by": f.stated_by} for f in self.files]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DownloadUnit":
        """The unit to_dict wrote; ValueError (or KeyError, TypeError) if it is damaged."""
        files = tuple(FileSpec(str(f["url"]), str(f["name"]), f.get("sha256"), f.get("size"),
                               str(f.get("stated_by") or "the catalog")) for f in data["files"])
        fmt = data["format"]
        if fmt not in ("gguf", "onnx", "speech") or not files:
            raise ValueError("not a download unit")
        projector = data.get("projector")  # absent in what an earlier Kestrel wrote: text only
        if projector is not None and not any(f.name == projector for f in files):
            raise ValueError("a projector that is not one of the unit's files")
        return cls(str(data["key"]), str(data["title"]), fmt, files, str(data["source"]),
                   data.get("catalog_id"), projector)


@dataclass(frozen=True)
class Pasted:
    """What the user's text names: a repository (path None) or one file in it, or a URL."""

    repo: str | None
    revision: str
    path: str | None
    url: str | None
    folder: str = ""  # a /tree/<rev>/<folder> link: only what is under it


class HubError(ValueError):
    """Text that names no repository or address Kestrel can download from; str() says why."""


class UnsafeNames(HubError):
    """Every model the repository offers has a name Kestrel will not save as a file."""


def default_endpoint() -> str:
    """Hugging Face's address, or the mirror HF_ENDPOINT names (as huggingface_hub honours it)."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def resolve_url(repo: str, path: str, revision: str = "main", endpoint: str | None = None) -> str:
    base = (endpoint or default_endpoint()).rstrip("/")
    return f"{base}/{repo}/resolve/{quote(revision, safe='')}/{quote(path)}"


def parse_pasted(text: str, endpoint: str | None = None) -> Pasted:
    """Classify what the user pasted; HubError if it is none of the kinds Kestrel takes."""
    text = text.strip()
    if _REPO_ID.match(text):
        return Pasted(text, "main", None, None)
    parts = urlsplit(text)
    if "://" in text and parts.scheme.lower() not in ("http", "https"):
        raise HubError(bad_scheme(text).message)
    if parts.scheme.lower() not in ("http", "https"):
        raise HubError(f"\"{text}\" is neither a Hugging Face repository (such as "
                       f"Qwen/Qwen2.5-1.5B-Instruct-GGUF) nor an http:// or https:// address.")
    try:
        check_scheme(text)
    except DownloadError as exc:
        raise HubError(exc.message) from None
    base = urlsplit(endpoint or default_endpoint())
    host = (parts.hostname or "").lower()
    if (host, parts.port) == ((base.hostname or "").lower(), base.port):
        return _parse_hub_path(text, parts.path, base.path.rstrip("/"))
    if host in _HF_HOSTS:
        return _parse_hub_path(text, parts.path, "")
    return Pasted(None, "main", None, text)


def units_for(text: str, endpoint: str | None = None, timeout: float = 30.0,
              name: str | None = None, steps: Steps | None = None) -> tuple[DownloadUnit, ...]:
    """The units what the user pasted offers; a repository is listed over the network.

    name is the file name to save a plain address's file as (default: the URL's last part).
    HubError for text that names nothing usable, DownloadError for a failed listing (a host
    that cannot be reached is said at once: the listing is tried once). steps hears what
    the listing is doing before its answer ("Looking up huggingface.co…").
    """
    endpoint = (endpoint or default_endpoint()).rstrip("/")
    pasted = parse_pasted(text, endpoint)
    if pasted.url is not None:
        return (direct_unit(pasted.url, name),)
    assert pasted.repo is not None
    repo, revision, path = pasted.repo, pasted.revision, pasted.path
    if path is not None and name_problem(path) is not None:
        raise UnsafeNames(f'"{shown(path)}" in {repo} {name_problem(path)}, so Kestrel will not save '
                          f"it as a file.")
    if path is not None and _SHARD.match(PurePosixPath(path).name):
        url = resolve_url(repo, path, revision, endpoint)
        units = group_units(repo, revision, endpoint, repo_files(repo, revision, endpoint, timeout, steps))
        return tuple(u for u in units if any(f.url == url for f in u.files)) or \
            (_file_unit(repo, revision, endpoint, path),)
    if path is not None and PurePosixPath(path).name != GENAI_CONFIG:
        return (_file_unit(repo, revision, endpoint, path),)
    files = repo_files(repo, revision, endpoint, timeout, steps)
    folder = str(PurePosixPath(path).parent) if path is not None else pasted.folder.strip("/")
    if folder not in ("", "."):
        files = [f for f in files if f.path.startswith(folder + "/")]
    units = group_units(repo, revision, endpoint, files)
    refused = [f for f in files if f.refused is not None and _model_file(f.path)]
    if not units and refused:
        raise UnsafeNames(f'{repo} offers no model Kestrel can save: its file "{shown(refused[0].path)}" '
                          f"{refused[0].refused}, so it was left out.")
    return units


def _model_file(path: str) -> bool:
    name = PurePosixPath(path).name.lower()
    return name.endswith(".gguf") or name == GENAI_CONFIG


def direct_unit(url: str, name: str | None = None) -> DownloadUnit:
    """A plain address, taken as given: one file, saved under name or the URL's last part.

    HubError when neither gives a file name Kestrel can save as.
    """
    check_scheme(url)
    saved = name if name is not None else unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if not plain_file_name(saved):
        why = name_problem(saved) if saved and "/" not in saved and not saved.startswith(".") else None
        if name is not None:
            raise HubError(f'"{shown(name)}" is not a file name Kestrel can save as'
                           f"{': it ' + why if why else ''}. Give a name without folders that does "
                           f"not start with a dot, such as model.gguf.")
        raise HubError(f"The address {shown(url, 300)} does not end in a file name Kestrel can save as"
                       f"{' (its last part ' + why + ')' if why else ''}.")
    return DownloadUnit(saved, PurePosixPath(saved).stem or saved, "gguf",
                        (FileSpec(url, saved),), url)


def catalog_unit(entry: CatalogEntry, endpoint: str | None = None) -> DownloadUnit:
    """A catalog model as a unit; an ONNX model keeps its folder's layout under the folder's name."""
    endpoint = (endpoint or default_endpoint()).rstrip("/")
    paths = [f.path for f in entry.files]
    folder = _onnx_folder(paths) if entry.format == "onnx" else ""
    files = tuple(FileSpec(resolve_url(entry.repo, f.path, entry.revision, endpoint),
                           _onnx_name(folder, f.path, entry.repo) if folder
                           else PurePosixPath(f.path).name, f.sha256, f.size)
                  for f in entry.files)
    source = _unit_source(endpoint, entry.repo, entry.revision, folder, files)
    projector = entry.projector
    if projector is not None:
        name = PurePosixPath(projector.path).name
        files += (FileSpec(resolve_url(entry.repo, projector.path, entry.revision, endpoint), name,
                           projector.sha256, projector.size),)
    return DownloadUnit(folder or paths[0], entry.name, entry.format, files, source, entry.id,
                        PurePosixPath(projector.path).name if projector is not None else None)


def choose(units: tuple[DownloadUnit, ...], wanted: str) -> DownloadUnit | None:
    """The unit `--file` names: by its key, a file's path or name, or its title; any case."""
    wanted = wanted.strip().strip("/")
    for exact in (True, False):
        for unit in units:
            own = [f for f in unit.files if f.name != unit.projector]  # a projector is no model to name
            names = {unit.key, unit.title, *(f.name for f in own), *(_repo_path(f.url) for f in own)}
            if any(n == wanted if exact else n.lower() == wanted.lower() for n in names):
                return unit
    return None


def group_units(repo: str, revision: str, endpoint: str, files: list[RepoFile]) -> tuple[DownloadUnit, ...]:
    """The repository's choices: each GGUF, each split GGUF (all shards), each ONNX GenAI folder."""
    units: list[DownloadUnit] = []
    onnx_folders = sorted({str(PurePosixPath(f.path).parent) for f in files
                           if PurePosixPath(f.path).name == GENAI_CONFIG})
    name = repo.split("/")[1]
    for folder in onnx_folders:
        inside = [f for f in files
                  if _under(f.path, folder) and not PurePosixPath(f.path).name.startswith(".")]
        if any(f.refused is not None for f in inside):
            continue  # the folder without that file would not run
        title = name if folder == "." else f"{name} ({folder})"
        units.append(_unit(repo, revision, endpoint, "onnx", folder, title, inside))
    shards: dict[tuple[str, str], list[RepoFile]] = {}
    for f in sorted(files, key=lambda f: f.path):
        name = PurePosixPath(f.path).name
        if f.refused is not None or not name.lower().endswith(".gguf") or looks_like_projector(name):
            continue  # mmproj files are vision projectors, not chat models on their own
        split = _SHARD.match(name)
        if split is None:
            units.append(_unit(repo, revision, endpoint, "gguf", f.path, PurePosixPath(name).stem, [f]))
        else:
            folder = str(PurePosixPath(f.path).parent)
            shards.setdefault((folder, split["stem"] + split["count"]), []).append(f)
    for group in shards.values():
        first = _SHARD.match(PurePosixPath(group[0].path).name)
        assert first is not None
        units.append(_unit(repo, revision, endpoint, "gguf", group[0].path, first["stem"], group))
    return tuple(_with_projector(repo, revision, endpoint, unit, files) for unit in units)


def _with_projector(repo: str, revision: str, endpoint: str, unit: DownloadUnit,
                    files: list[RepoFile]) -> DownloadUnit:
    """A GGUF unit with the vision projector of its repository folder added, chosen by name
    as the library pairs one (projector.best_name): the fetch reads its header before pairing."""
    if unit.format != "gguf":
        return unit
    folder = PurePosixPath(unit.key).parent
    offered = {PurePosixPath(f.path).name: f for f in files
               if f.refused is None and PurePosixPath(f.path).parent == folder
               and looks_like_projector(PurePosixPath(f.path).name)}
    best = best_name(sorted(offered), PurePosixPath(unit.key).name)
    if best is None or any(spec.name == best for spec in unit.files):
        return unit
    chosen = offered[best]
    spec = FileSpec(resolve_url(repo, chosen.path, revision, endpoint), best, chosen.sha256, chosen.size, _LISTING)
    return dataclasses.replace(unit, files=(*unit.files, spec), projector=best)


def _unit(repo: str, revision: str, endpoint: str, fmt: Literal["gguf", "onnx"], key: str,
          title: str, files: list[RepoFile]) -> DownloadUnit:
    """key is the GGUF's (first shard's) path, or the ONNX folder's ("." for the root)."""
    unit_files = tuple(
        FileSpec(resolve_url(repo, f.path, revision, endpoint),
                 _onnx_name(key, f.path, repo) if fmt == "onnx" else PurePosixPath(f.path).name,
                 f.sha256, f.size, _LISTING) for f in files)
    source = _unit_source(endpoint, repo, revision, key if fmt == "onnx" else "", unit_files)
    return DownloadUnit(key, title, fmt, unit_files, source)


def _file_unit(repo: str, revision: str, endpoint: str, path: str) -> DownloadUnit:
    name = PurePosixPath(path).name
    return DownloadUnit(path, PurePosixPath(name).stem, "gguf",
                        (FileSpec(resolve_url(repo, path, revision, endpoint), name),),
                        resolve_url(repo, path, revision, endpoint))


def _unit_source(endpoint: str, repo: str, revision: str, folder: str,
                 files: tuple[FileSpec, ...]) -> str:
    """The address a unit is known by ("downloaded from …"): a GGUF's (first) file's, an
    ONNX folder's page."""
    if not folder:
        return files[0].url
    if folder == ".":
        return f"{endpoint}/{repo}/tree/{quote(revision, safe='')}"
    return f"{endpoint}/{repo}/tree/{quote(revision, safe='')}/{quote(folder)}"


def _under(path: str, folder: str) -> bool:
    return folder == "." or path.startswith(folder + "/")


def _onnx_folder(paths: list[str]) -> str:
    config = next(p for p in paths if PurePosixPath(p).name == GENAI_CONFIG)
    return str(PurePosixPath(config).parent)


def _onnx_name(folder: str, path: str, repo: str) -> str:
    """Where an ONNX file lands: under its folder's own name (the repository's for the
    root), with the layout below the folder kept."""
    if folder in ("", "."):
        return f"{repo.split('/')[1]}/{path}"
    return f"{PurePosixPath(folder).name}/{PurePosixPath(path).relative_to(folder).as_posix()}"


def _repo_path(url: str) -> str:
    """The path in the repository of a .../resolve/<rev>/<path> URL ("" for any other)."""
    found = re.search(r"/resolve/[^/]+/(.+)$", urlsplit(url).path)
    return unquote(found.group(1)) if found else ""


def _parse_hub_path(text: str, path: str, prefix: str) -> Pasted:
    parts = [unquote(p) for p in path[len(prefix):].split("/") if p] \
        if path.startswith(prefix) else []
    if parts and parts[0] in ("datasets", "spaces"):
        raise HubError(f"{text} is a Hugging Face {parts[0][:-1]}, not a model. Paste the "
                       f"address of a model repository or of a .gguf file.")
    if len(parts) < 2:
        raise HubError(f"{text} names no Hugging Face model repository. Paste an address "
                       f"such as https://huggingface.co/Qwen/Qwen2.5-1.5B-Instruct-GGUF.")
    repo = f"{parts[0]}/{parts[1]}"
    if len(parts) == 2:
        return Pasted(repo, "main", None, None)
    if len(parts) >= 4 and parts[2] == "tree":
        return Pasted(repo, parts[3], None, None, "/".join(parts[4:]))
    if len(parts) >= 5 and parts[2] in ("blob", "resolve"):
        return Pasted(repo, parts[3], "/".join(parts[4:]), None)
    raise HubError(f"{text} is a Hugging Face page Kestrel cannot download from. Paste the "
                   f"repository's address, or a file's (…/blob/main/<file>.gguf).")
