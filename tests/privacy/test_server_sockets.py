"""With the API server on (`kestrel serve`), the only network socket Kestrel opens is the one
listening on the chosen address; with it off, tests/privacy/test_no_network.py proves none."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import openai

from tests.helpers.syscalls import findings, start_traced
from tests.server.serve_process import ROOT, interrupt, read_ready, serve_command, serve_env
from tests.service.conftest import install


def test_serve_listens_on_the_chosen_address_only(tmp_path: Path, tiny_model: Path, kestrel_home: Path) -> None:
    install(tiny_model)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / f"strace-{time.monotonic_ns()}.log"
    process = start_traced(serve_command("--port", str(port)), log, env=serve_env(kestrel_home), cwd=ROOT)
    try:
        ready = read_ready(process)
        with openai.OpenAI(base_url=f"{ready.address}/v1", api_key=ready.key, max_retries=0, timeout=60) as client:
            client.chat.completions.create(model="", messages=[{"role": "user", "content": "secret words"}],
                                           max_tokens=4)
    finally:
        _, err = interrupt(process, traced=True)
    assert process.returncode == 0, err
    network = findings(log.read_text(errors="replace"))
    listening = re.compile(rf'bind\(\d+, \{{sa_family=AF_INET, sin_port=htons\({port}\), '
                           r'sin_addr=inet_addr\("127\.0\.0\.1"\)\}')
    binds = [line for line in network if listening.search(line)]
    assert len(binds) == 1, network
    others = [line for line in network
              if not listening.search(line) and not re.search(r"socket\(AF_INET, SOCK_STREAM", line)]
    assert others == [], others
    assert len(network) == 2, network  # that socket, and its bind: no lookup, no connection out
