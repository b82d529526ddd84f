"""Record Hugging Face's answer to a model search, for tests/fixtures/hub/ (needs internet).

    python scripts/record_hub_answer.py QUERY [--limit N] [--format gguf|onnx] [--endpoint URL]

Sends the same GET the app sends (app.library.huggingface.hub_search.search_url: the parameters
huggingface_hub's list_models sends) and saves the body, exactly as it arrived, as
tests/fixtures/hub/search-<query>-<format>.json, with the answer's status and headers in
….headers.json beside it. The fixtures there now are constructed, not recorded (see the
README there); this replaces one with the real thing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.library.huggingface.hub import default_endpoint  # noqa: E402
from app.library.huggingface.hub_search import DEFAULT_LIMIT, search_url  # noqa: E402

_MAX_BYTES = 8 * 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("query")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    parser.add_argument("--format", choices=("gguf", "onnx"), default="gguf")
    parser.add_argument("--endpoint", default=None, help="default: HF_ENDPOINT, else https://huggingface.co")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "hub")
    args = parser.parse_args(argv)
    url = search_url(args.query, args.endpoint or default_endpoint(), args.limit, args.format)
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "application/json"}),
                                timeout=60) as answer:
        body = answer.read(_MAX_BYTES + 1)
        headers = {"url": url, "status": answer.status, "headers": dict(answer.headers.items())}
    if len(body) > _MAX_BYTES:
        print(f"The answer is over {_MAX_BYTES} bytes; not saved.", file=sys.stderr)
        return 1
    json.loads(body)  # a recording that is not JSON is not worth keeping
    stem = f"search-{re.sub(r'[^A-Za-z0-9._-]+', '-', args.query).strip('-').lower()}-{args.format}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_bytes(body)
    (args.out / f"{stem}.headers.json").write_text(json.dumps(headers, indent=2) + "\n", encoding="utf-8")
    print(f"Saved {args.out / (stem + '.json')} ({len(body)} bytes) from {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
