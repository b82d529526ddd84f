"""Fetch one recommended catalog model on the build runner, for the installer's bundled-model component.

    python scripts/fetch_bundled_model.py --out DIR [--model CATALOG-ID]

DIR is used as a models folder: the model lands in DIR/<id>/ with its model.json, exactly
as the app's own download would put it, and that folder is what make_installer.py's
--bundled-model takes. Every file is verified against the SHA-256 the hosting server
states for it (Hugging Face's X-Linked-Etag); a file whose server states none is refused,
and a catalog hash that disagrees with the server's stops the build. No hash is typed in.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from app.library.catalog import CATALOG_FILE, CatalogEntry, find_entry, load_catalog, recommended_entry  # noqa: E402
from app.library.download import DownloadError, DownloadProgress, RemoteFacts, probe  # noqa: E402
from app.library.download.transport import TransientFailure  # noqa: E402
from app.library.fetch import FetchRefused, fetch_unit  # noqa: E402
from app.library.huggingface.hub import DownloadUnit, catalog_unit  # noqa: E402
from app.library.models import ModelLibrary  # noqa: E402


class BundleError(Exception):
    """The model cannot be bundled; str() says why."""


def choose_entry(catalog: Path, wanted: str | None) -> CatalogEntry:
    problems: list[str] = []
    entries = load_catalog(catalog, problems)
    for problem in problems:
        print(f"fetch_bundled_model: {problem}", file=sys.stderr)
    entry = find_entry(entries, wanted) if wanted else recommended_entry(entries)
    if entry is None:
        raise BundleError(f"The catalog {catalog} has no model {wanted!r}." if wanted
                          else f"The catalog {catalog} marks no model as recommended.")
    if not entry.instruct:
        raise BundleError(f"{entry.id} is not an instruct (chat) model; only those are bundled.")
    return entry


def server_stated(unit: DownloadUnit, timeout: float = 30.0) -> DownloadUnit:
    """The unit with each file's SHA-256 and size as its server states them (HEAD only)."""
    files = []
    for spec in unit.files:
        host = urlsplit(spec.url).netloc
        facts = _probe(spec.url, spec.name, timeout)
        if facts.sha256 is None:
            raise BundleError(f"{host} states no SHA-256 for {spec.name} ({spec.url}), so it cannot be "
                              f"verified; a bundled model is only shipped verified.")
        if spec.sha256 is not None and spec.sha256.lower() != facts.sha256:
            raise BundleError(f"The catalog's SHA-256 for {spec.name} is not the one {host} states "
                              f"({facts.sha256}): the catalog is out of date; nothing was downloaded.")
        files.append(replace(spec, sha256=facts.sha256, size=facts.size if facts.size is not None else spec.size,
                             stated_by=host))
    return replace(unit, files=tuple(files))


def _probe(url: str, name: str, timeout: float, delays: tuple[float, ...] = (5.0, 20.0)) -> RemoteFacts:
    """HEAD the file, trying again after a server hiccup (a 5xx, a dropped connection)."""
    for delay in (*delays, None):
        try:
            return probe(url, timeout)
        except TransientFailure as failure:
            if delay is None:
                raise BundleError(f"{urlsplit(url).netloc} did not answer for {name} ({url}): "
                                  f"{failure.reason}") from None
            time.sleep(delay)
        except DownloadError as exc:
            raise BundleError(f"{urlsplit(url).netloc} refused {name} ({url}): {exc}") from None
    raise AssertionError("unreachable")


def _printer() -> Callable[[DownloadProgress], None]:
    shown = [-1]

    def show(progress: DownloadProgress) -> None:
        if not progress.total:
            return
        step = progress.done * 20 // progress.total  # every 5%
        if step != shown[0]:
            shown[0] = step
            print(f"  {progress.file}: {progress.done / 1024**2:.0f} of {progress.total / 1024**2:.0f} MB",
                  flush=True)
    return show


def fetch(out: Path, wanted: str | None = None, catalog: Path = CATALOG_FILE,
          endpoint: str | None = None) -> Path:
    """Download the model into out/<id>/ (or find it there already); its folder."""
    entry = choose_entry(catalog, wanted)
    unit = server_stated(catalog_unit(entry, endpoint))
    print(f"Fetching {entry.name} ({entry.id}) from {unit.source}", flush=True)
    library = ModelLibrary(out)
    try:
        fetched = fetch_unit(library, unit, progress=_printer())
    except (DownloadError, FetchRefused) as exc:
        raise BundleError(str(exc)) from None
    folder = out / fetched.model.id
    for spec in unit.files:
        print(f"  verified {spec.name}: sha256 {spec.sha256} as {spec.stated_by} states it", flush=True)
    print(f"Bundled model folder: {folder}", flush=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="a models folder to fetch into")
    parser.add_argument("--model", help="a catalog id (default: the catalog's recommended model)")
    parser.add_argument("--catalog", type=Path, default=CATALOG_FILE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        fetch(args.out, args.model, args.catalog)
    except BundleError as exc:
        print(f"fetch_bundled_model: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
