"""`python -m app models search QUERY` and `models files REPO`: Hugging Face's public model
search, and a repository's files with their quantization, size and predicted speed on this machine.

Nothing here opens a socket until the user runs one of them: the search client is imported
inside the command, not with this module. `models get REPO@Q4_K_M` then downloads one.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from app.cli.models.models_catalog import measured_here, verdict_words
from app.cli.models.models_common import CLI_IMPORT_STEP, EXIT_FILES, load_settings
from app.cli.user_error import EXIT_MODEL, EXIT_OK, EXIT_USAGE, UserError
from app.core.units import human_size
from app.library.huggingface.file_names import shown

if TYPE_CHECKING:
    from app.hardware.report import HardwareReport
    from app.library.huggingface.hub_search import HubRepo
    from app.service.library.hub_search import ChoiceRow

# Said once under a listing: a file's verdict is rougher than a downloaded model's.
ROUGH_NOTE = ("Speeds are estimated from each file's size (and the model size its name states): the model's "
              "shape is known only once it is downloaded.")


def add_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser], run: Any) -> None:
    search = actions.add_parser("search", help="search Hugging Face for GGUF (or ONNX) models: the only "
                                               "time this command uses the network")
    search.add_argument("query", metavar="QUERY", help="words in the repository's name, such as qwen2.5 coder")
    search.add_argument("--limit", type=int, default=20, metavar="N", help="at most N repositories (1-100; default 20)")
    search.add_argument("--format", choices=("gguf", "onnx"), default="gguf",
                        help="the kind of model files the repositories hold (default gguf)")
    search.add_argument("--files", action="store_true",
                        help="also list the files of each repository found (one request per repository)")
    search.add_argument("--json", action="store_true", help="one JSON object per repository and line")
    search.set_defaults(run=run, handler=_search)
    files = actions.add_parser("files", help="a Hugging Face repository's model files: quantization, size, and "
                                             "how fast each would run here")
    files.add_argument("repo", metavar="HF-REPO", help="owner/name, as models search lists it")
    files.add_argument("--json", action="store_true", help="one JSON object per file and line")
    files.set_defaults(run=run, handler=_files)


def _search(args: argparse.Namespace) -> int:
    from app.library.download import DownloadError
    from app.library.huggingface.hub import default_endpoint
    from app.library.huggingface.hub_search import MAX_QUERY, search_models

    query = args.query.strip()
    if not query or len(query) > MAX_QUERY:
        raise UserError(f"Give words to search for (1 to {MAX_QUERY} characters), such as: "
                        "kestrel models search qwen2.5", EXIT_USAGE)
    if not 1 <= args.limit <= 100:
        raise UserError(f"--limit {args.limit} is not allowed: give a number from 1 to 100.", EXIT_USAGE)
    try:
        repos = search_models(query, default_endpoint(), limit=args.limit, fmt=args.format)
    except DownloadError as exc:
        raise UserError(exc.words(CLI_IMPORT_STEP), EXIT_FILES) from None
    if not repos:
        print(f'No {args.format.upper()} models match "{shown(query)}" on Hugging Face. Try fewer or other '
              "words.", file=sys.stderr)
        return EXIT_OK
    if args.json:
        for repo in repos:
            row = _repo_row(repo)
            if args.files:
                rows, problem = _listed_or_why(repo.id)
                row["files"] = [_choice_row(c) for c in rows]
                row["problem"] = problem
            print(json.dumps(row, ensure_ascii=False))
        return EXIT_OK
    width = max(len(shown(r.id)) for r in repos)
    print(f"{'REPOSITORY':<{width}}  {'DOWNLOADS':>9}  {'LIKES':>6}  UPDATED")
    for repo in repos:
        gated = "  (gated: download it in a browser)" if repo.gated else ""
        print(f"{shown(repo.id):<{width}}  {_count(repo.downloads):>9}  {_count(repo.likes):>6}  "
              f"{repo.updated or '-'}{gated}")
        if args.files:
            rows, problem = _listed_or_why(repo.id)
            if problem is not None:
                print(f"    {problem}")
            else:
                _print_choices(rows, indent="    ")
    if args.files:
        print(f"\n{ROUGH_NOTE}")
    else:
        print(f"\nTo see a repository's files: kestrel models files {shown(repos[0].id)}")
    return EXIT_OK


def _files(args: argparse.Namespace) -> int:
    rows = _listed(args.repo.strip())
    if args.json:
        for row in rows:
            print(json.dumps(_choice_row(row), ensure_ascii=False))
        return EXIT_OK
    if not rows:
        raise UserError(f"{shown(args.repo)} holds no GGUF file and no ONNX Runtime GenAI folder, so nothing "
                        "in it is a model Kestrel can run.", EXIT_MODEL)
    _print_choices(rows)
    print(f"\n{ROUGH_NOTE}")
    pick = next((r.choice.quantization for r in rows if r.choice.quantization), None)
    if pick:
        print(f"\nTo download one: kestrel models get {shown(args.repo.strip())}@{pick}")
    return EXIT_OK


def _listed_or_why(repo: str) -> tuple[tuple[ChoiceRow, ...], str | None]:
    """A found repository's choices, or why they could not be listed: one repository that
    cannot be listed (gated, gone since) leaves the others listed."""
    try:
        return _listed(repo), None
    except UserError as exc:
        return (), str(exc)


def _listed(repo: str) -> tuple[ChoiceRow, ...]:
    """The repository's choices, each judged on this machine as the window judges them."""
    from app.library.download import DownloadError
    from app.library.huggingface.hub import HubError, default_endpoint, parse_pasted
    from app.library.huggingface.hub_search import repo_choices
    from app.service.library.hub_search import judged_choice

    try:
        pasted = parse_pasted(repo)
    except HubError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    if pasted.repo is None:
        raise UserError(f"{shown(repo)} is not a Hugging Face repository (owner/name).", EXIT_USAGE)
    try:
        choices = repo_choices(pasted.repo, default_endpoint())
    except DownloadError as exc:
        raise UserError(exc.words(CLI_IMPORT_STEP), EXIT_FILES) from None
    _, settings = load_settings()
    report = _machine() if choices else None
    measured = measured_here() if choices else ()
    return tuple(judged_choice(report, choice, settings, 0, repo=pasted.repo, measured=measured) for choice in choices)


@lru_cache(maxsize=1)
def _machine() -> HardwareReport:
    """This machine's report, probed once however many repositories are listed."""
    from app.hardware.probe import probe  # the runtimes' checks: only these commands need them

    return probe()


def _print_choices(rows: tuple[ChoiceRow, ...], indent: str = "") -> None:
    if not rows:
        print(f"{indent}(no GGUF file or ONNX folder)")
        return
    width = max(len(shown(r.choice.unit.key)) for r in rows)
    verdicts = [verdict_words(r.fit, unknown="speed not known") for r in rows]
    verdict_width = max(len(v) for v in verdicts)
    for row, verdict in zip(rows, verdicts):
        unit = row.choice.unit
        size = human_size(unit.size) if unit.size is not None else "size n/a"
        print(f"{indent}{row.choice.quantization or '-':<9}  {size:>9}  {verdict:<{verdict_width}}  "
              f"{shown(unit.key):<{width}}{shown(unit.parts_words)}")


def _repo_row(repo: HubRepo) -> dict[str, Any]:
    return {"id": repo.id, "downloads": repo.downloads, "likes": repo.likes, "last_modified": repo.last_modified,
            "pipeline_tag": repo.pipeline_tag, "gated": repo.gated, "tags": list(repo.tags)}


def _choice_row(row: ChoiceRow) -> dict[str, Any]:
    unit, fit = row.choice.unit, row.fit
    speed = fit.speed if fit is not None else None
    return {"key": unit.key, "format": unit.format, "quantization": row.choice.quantization, "size": unit.size,
            "files": len(unit.files), "verdict": fit.verdict.value if fit else None,
            "tokens_per_s": round(speed.tokens_per_s, 1) if speed is not None else None,
            "speed_measured": speed.measured if speed is not None else None, "reason": row.reason}


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"
