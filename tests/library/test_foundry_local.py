"""Foundry Local found on this PC: its address read from `foundry service status` as Windows users recorded it
(tests/fixtures/foundry_local/), or from the newer CLI's `foundry server status --output json` in the shape
public projects read (not recorded: unverified), then its OpenAI API asked on loopback as any found server is.

Untested on Windows: the command is not run here (Foundry Local has no Linux build); its recorded output
is fed in, and its /v1/models is served by a loopback fake that answers the body a user recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.library.servers.finding import AskedWhere, find_on_this_pc
from app.library.servers.foundry_local import endpoint_in, foundry_local_url
from app.library.servers.records import ServerKind
from tests.helpers.remote_peers import closed_port

RECORDED = Path(__file__).parents[1] / "fixtures" / "foundry_local"
RECORDED_PORT = 55064  # the port in status_running.txt


def recorded(name: str) -> str:
    return (RECORDED / name).read_text(encoding="utf-8")


@contextmanager
def foundry_fake() -> Iterator[tuple[str, list[str]]]:
    """A loopback server answering GET /v1/models with the body a Foundry Local user recorded (other paths:
    404); its base URL and the paths it was asked."""
    asked: list[str] = []
    body = recorded("v1_models.json").encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            status = 200 if self.path == "/v1/models" else 404
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body) if status == 200 else 0))
            self.end_headers()
            if status == 200:
                self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def as_if_running_on(url: str) -> str:
    """The recorded running status with its port moved to the fake's (the only change made to it)."""
    port = url.rsplit(":", 1)[1]
    return recorded("status_running.txt").replace(f":{RECORDED_PORT}/", f":{port}/")


def older_cli(status: str | None):
    """A status runner for the CLI before 0.10: `service status` prints `status`. What it prints for the newer
    `server status` is not recorded, so nothing usable is assumed (an empty output)."""
    return lambda args: status if status is None or args[0] == "service" else ""


def newer_cli(web_urls: list[str], *, before: str = "") -> str:
    """`foundry server status --output json` in the shape the public projects that find Foundry Local read
    (microsoft/aspire #19213 and others: `running`, `webUrls`): not a recording, so unverified."""
    return before + json.dumps({"running": True, "webUrls": web_urls})


def test_the_recorded_running_status_gives_the_services_address() -> None:
    assert endpoint_in(recorded("status_running.txt")) == f"http://127.0.0.1:{RECORDED_PORT}"


@pytest.mark.parametrize("name", ["status_not_running.txt", "status_failed.txt"])
def test_a_stopped_or_failing_service_gives_no_address(name: str) -> None:
    assert endpoint_in(recorded(name)) is None  # the failure names an address too, but not as running on it


def test_an_address_off_this_pc_is_never_taken() -> None:
    """Not recorded: the running line changed by this test to name another host, which is not contacted."""
    moved = recorded("status_running.txt").replace("127.0.0.1", "192.168.1.20")
    assert endpoint_in(moved) is None


def test_nothing_is_run_on_a_system_without_foundry_local() -> None:
    def must_not_run(args: tuple[str, ...]) -> str:
        raise AssertionError("the foundry command was run on Linux")

    assert foundry_local_url("linux", must_not_run) is None
    assert foundry_local_url("win32", older_cli(recorded("status_running.txt"))) == f"http://127.0.0.1:{RECORDED_PORT}"
    assert foundry_local_url("darwin", older_cli(None)) is None  # not installed: no command to run


def test_the_newer_clis_json_gives_its_first_address_on_this_pc() -> None:
    assert endpoint_in(newer_cli(["http://127.0.0.1:53494/"])) == "http://127.0.0.1:53494"
    # Status lines before the JSON are stepped over; an address off this PC is never taken.
    assert endpoint_in(newer_cli(["http://192.168.1.20:5273", "http://localhost:5273"],
                                 before="Service is Ready\n")) == "http://localhost:5273"
    assert endpoint_in(newer_cli(["http://192.168.1.20:5273"])) is None
    assert endpoint_in(newer_cli([])) is None


def test_the_newer_cli_is_asked_first_and_the_older_one_after() -> None:
    asked: list[tuple[str, ...]] = []

    def newer(args: tuple[str, ...]) -> str:
        asked.append(args)
        return newer_cli(["http://127.0.0.1:53494"])

    assert foundry_local_url("win32", newer) == "http://127.0.0.1:53494"
    assert asked == [("server", "status", "--output", "json")]
    older = older_cli(recorded("status_running.txt"))
    asked.clear()
    assert foundry_local_url("win32", lambda args: asked.append(args) or older(args)) == \
        f"http://127.0.0.1:{RECORDED_PORT}"
    assert asked == [("server", "status", "--output", "json"), ("service", "status")]


def test_find_on_this_pc_finds_foundry_local_where_its_status_says_and_asks_its_openai_api() -> None:
    with foundry_fake() as (url, asked):
        foundry = AskedWhere(ServerKind.OPENAI, "Foundry Local", "/models",
                             lambda: foundry_local_url("win32", older_cli(as_if_running_on(url))))
        found = find_on_this_pc((), asked_where=(foundry,))
    assert [(f.name, f.url, f.kind, f.program) for f in found] == [
        ("foundry-local", url, ServerKind.OPENAI, "Foundry Local")]
    assert asked == ["/v1/models"]


def test_a_stopped_service_or_a_port_that_does_not_answer_is_not_found() -> None:
    stopped = AskedWhere(ServerKind.OPENAI, "Foundry Local", "/models",
                         lambda: foundry_local_url("win32", older_cli(recorded("status_not_running.txt"))))
    gone = AskedWhere(ServerKind.OPENAI, "Foundry Local", "/models",
                      lambda: foundry_local_url("win32", older_cli(as_if_running_on(f"http://127.0.0.1:{closed_port()}"))))
    assert find_on_this_pc((), asked_where=(stopped, gone)) == []

