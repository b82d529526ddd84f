"""scripts/record_hub_answer.py sends the app's search and saves the answer as it came, with its
headers; run here against a hub served on 127.0.0.1 (a real recording needs the internet)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.http_servers import TestServer
from tests.helpers.hub_answers import THINKER_ANSWER, search_path, serve_search

ROOT = Path(__file__).resolve().parents[2]


def test_the_script_saves_the_body_and_headers_of_the_apps_search(server: TestServer, tmp_path: Path) -> None:
    serve_search(server, "Thinker 7B", limit=5)

    result = subprocess.run([sys.executable, "scripts/record_hub_answer.py", "Thinker 7B", "--limit", "5",
                             "--endpoint", server.base, "--out", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert result.returncode == 0, result.stderr
    assert [e.path for e in server.log] == [search_path("Thinker 7B", limit=5)]
    assert (tmp_path / "search-thinker-7b-gguf.json").read_bytes() == THINKER_ANSWER.read_bytes()
    headers = json.loads((tmp_path / "search-thinker-7b-gguf.headers.json").read_text(encoding="utf-8"))
    assert headers["status"] == 200 and headers["url"].endswith(search_path("Thinker 7B", limit=5))
    assert headers["headers"]["Content-Length"] == str(len(THINKER_ANSWER.read_bytes()))
