"""Hugging Face's public model search: one bounded GET of {endpoint}/api/models, read defensively.

Nothing here opens a socket until search_models is called, and the front ends call it only
when the user typed a query (the window's search box, `kestrel models search`). A
repository's files are listed by hub_listing.repo_files and grouped into download units by
hub.group_units, as a pasted repository is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from collections.abc import Iterable
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit

from app.library.download.errors import DownloadError, DownloadErrorKind
from app.library.download.transport import Steps
from app.library.huggingface.file_names import shown
from app.library.huggingface.hub import DownloadUnit, group_units
from app.library.huggingface.hub_listing import bounded_get, repo_files

SearchFormat = Literal["gguf", "onnx"]
DEFAULT_LIMIT = 20
MAX_LIMIT = 100   # one page of the hub's answer; more is a narrower query
MAX_QUERY = 200   # characters: a model name is far shorter
_MAX_ANSWER = 4 * 1024 * 1024  # a hundred repositories' facts are tens of kilobytes
_ANSWER_S = 30.0
# What list_models(expand=[...]) asks the hub for: the facts a result row shows.
EXPANDED = ("downloads", "likes", "lastModified", "tags", "pipeline_tag", "gated", "private")
# A quantization as llama.cpp's quantizer and the people who publish GGUFs name it in a file
# name: Q4_K_M, Q5_K_S, Q8_0, Q4_0_4_4, IQ4_XS, IQ2_XXS, TQ1_0, F16, BF16, F32, MXFP4, and
# the "UD-Q4_K_XL" kind (a Q4_K_XL between separators). Matched between separators only, so
# "Qwen2.5" holds none.
_QUANT = re.compile(r"(?<![A-Za-z0-9])(IQ\d_(?:XXS|XS|S|M|NL|L)|Q\d_K(?:_(?:XXS|XS|S|M|L|XL))?|Q\d_\d(?:_\d_\d)?"
                    r"|TQ\d_\d|B?F16|F32|MXFP4(?:_MOE)?)(?![A-Za-z0-9])", re.IGNORECASE)


@dataclass(frozen=True)
class HubRepo:
    """One repository the search found, with the facts the hub gave for it (None: not given)."""

    id: str
    downloads: int | None
    likes: int | None
    last_modified: str | None   # ISO 8601, as the hub writes it
    tags: tuple[str, ...]
    pipeline_tag: str | None
    gated: bool
    private: bool

    @property
    def updated(self) -> str:
        """The day it last changed ("2024-09-19"), or "" when the hub did not say."""
        return (self.last_modified or "")[:10]


def search_url(query: str, endpoint: str, limit: int = DEFAULT_LIMIT, fmt: SearchFormat = "gguf") -> str:
    """The address huggingface_hub 2.x's list_models(filter=fmt, search=query, sort="downloads",
    limit=limit, expand=EXPANDED) asks for, its parameters in the order it adds them. (1.x
    also sent direction=-1; 2.x dropped the parameter and the hub sorts most first.)"""
    params: list[tuple[str, str]] = [("filter", fmt), ("search", query), ("sort", "downloads"),
                                     ("limit", str(limit))]
    params += [("expand", field) for field in EXPANDED]
    return f"{endpoint.rstrip('/')}/api/models?{urlencode(params)}"


def search_models(query: str, endpoint: str, timeout: float = 30.0, limit: int = DEFAULT_LIMIT,
                  fmt: SearchFormat = "gguf", steps: Steps | None = None) -> list[HubRepo]:
    """The repositories whose name holds query and that hold fmt files, most downloaded first.

    One GET, tried once: a host that cannot be reached is said at once (DownloadError, with
    the downloader's words), and so is an answer that is not a list of models. ValueError
    for a query that is empty or too long (the front ends check it first).
    """
    query = query.strip()
    if not query or len(query) > MAX_QUERY:
        raise ValueError(f"a search needs 1 to {MAX_QUERY} characters")
    url = search_url(query, endpoint, max(1, min(limit, MAX_LIMIT)), fmt)
    body = bounded_get(url, timeout, steps, _MAX_ANSWER, _ANSWER_S, "its answer")
    return parse_search_answer(body, url)[:limit]


def parse_search_answer(body: bytes, url: str) -> list[HubRepo]:
    """The models of the hub's answer; an entry without a usable id is left out.

    DownloadError (REFUSED) when the answer is not a JSON list: a server that is not a hub.
    """
    try:
        if len(body) > _MAX_ANSWER:
            raise ValueError("too long")
        data = json.loads(body)
        if not isinstance(data, list):
            raise TypeError("not a list of models")
    except (ValueError, TypeError, RecursionError):
        raise DownloadError(DownloadErrorKind.REFUSED,
                            f"{urlsplit(url).netloc} did not answer with a list of models at "
                            f"{shown(url, 300)}. Check the address: Kestrel expects a Hugging Face "
                            f"server or a mirror of one.") from None
    return [repo for repo in (_repo(item) for item in data if isinstance(item, dict)) if repo is not None]


@dataclass(frozen=True)
class RepoChoice:
    """One thing a found repository offers to download, with its quantization (None: its
    name states none)."""

    unit: DownloadUnit
    quantization: str | None


def repo_choices(repo: str, endpoint: str, timeout: float = 30.0,
                 steps: Steps | None = None) -> tuple[RepoChoice, ...]:
    """A repository's GGUF files (a split one as one choice) and ONNX folders, smallest first.

    Listed as a pasted repository is (one GET of its file list); DownloadError as there.
    """
    return choices_of(group_units(repo, "main", endpoint, repo_files(repo, "main", endpoint, timeout, steps)))


def choices_of(units: Iterable[DownloadUnit]) -> tuple[RepoChoice, ...]:
    """Download units as choices, each with the quantization (or ONNX precision) its name
    states, smallest first (a size the listing does not state last)."""
    choices = [RepoChoice(u, quantization(u.key) if u.format == "gguf" else onnx_precision(u.key)) for u in units]
    return tuple(sorted(choices, key=lambda c: (c.unit.size is None, c.unit.size or 0, c.unit.key)))


def pick_quantization(choices: tuple[RepoChoice, ...], wanted: str) -> RepoChoice | None:
    """The choice whose quantization is wanted, in any case ("q4_k_m"); the smallest of several
    (choices come smallest first)."""
    wanted = wanted.strip().upper()
    return next((c for c in choices if c.quantization == wanted), None)


def offered_quantizations(choices: tuple[RepoChoice, ...]) -> list[str]:
    """The quantizations the choices' names state, each once, in order of name."""
    return sorted({c.quantization for c in choices if c.quantization})


def onnx_precision(folder: str) -> str | None:
    """The precision an ONNX folder's name states ("cpu-int4-rtn-block-32" is INT4), or None."""
    found = re.findall(r"(?<![a-z0-9])(int4|int8|fp16|fp32|bf16|q4f16)(?![a-z0-9])", folder.lower())
    return found[-1].upper() if found else None


def quantization(path: str) -> str | None:
    """The quantization a GGUF's file name states ("Q4_K_M", upper case), or None.

    The last one named wins: "Llama-3-8B-Q8_0-imat-Q4_K_M.gguf" is a Q4_K_M.
    """
    found = _QUANT.findall(PurePosixPath(path).name)
    return found[-1].upper() if found else None


def _repo(item: dict[str, Any]) -> HubRepo | None:
    # list_models reads "id"; older answers (and the hub's own pages) give "modelId" too.
    repo_id = item.get("id") if isinstance(item.get("id"), str) else item.get("modelId")
    if not isinstance(repo_id, str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*", repo_id):
        return None
    tags = item.get("tags")
    return HubRepo(repo_id, _count(item.get("downloads")), _count(item.get("likes")),
                   _text(item.get("lastModified")),
                   tuple(t for t in tags if isinstance(t, str))[:200] if isinstance(tags, list) else (),
                   _text(item.get("pipeline_tag")),
                   item.get("gated") not in (None, False), item.get("private") is True)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value: object) -> str | None:
    return value[:100] if isinstance(value, str) and value else None

