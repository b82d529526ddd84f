"""A chat through a server the person added: time to first token and tokens/s, against the same server read directly
and the same model run here.

    python benchmarks/remote.py [--server llama|kestrel] [--kind openai|ollama|anthropic|kestrel]
                                [--model PATH] [--tokens 128] [--runs 5] [--json OUT]

The remote server runs on 127.0.0.1 on the model file (default: Qwen2.5-Coder 0.5B Instruct, the test
extra's model, assembled under benchmarks/results): llama-cpp-python's own server (`--server llama`,
OpenAI-compatible) or a second `kestrel serve` in a home of its own (`--server kestrel`, spoken to in
the API `--kind` names). Three sides, the same prompt, greedy sampling, context and threads, their
runs interleaved (one of each, then again) so that a machine's drift falls on all three alike, each run
with its own prompt (numbered) so that none reads another's from the server's cache:
- server direct: the server read by the official `openai` client, streaming (its OpenAI API);
- through kestrel: Kestrel's engine loading remote://bench/MODEL, as a chat with that model does
  (EngineClient -> engine process -> the remote backend -> HTTP), timed on the caller's side;
- local: Kestrel's engine on the same file.
Goals (issue 40): through kestrel keeps >= 0.97 of server-direct tokens/s and adds < 30 ms to its
first token. Every number is the median of the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.conversation import Role  # noqa: E402
from app.core.generation import GenerationSettings  # noqa: E402
from app.engine.backends.resources import default_threads  # noqa: E402
from app.engine.protocol import ChatMessage, Delta, Done  # noqa: E402
from benchmarks.api import KEY, free_port, running  # noqa: E402
from benchmarks.throughput import CONTEXT, PROMPT  # noqa: E402

SERVER = "bench"  # the name the remote server is added under


def instruct_model() -> Path:
    """Qwen2.5-Coder 0.5B Instruct assembled under benchmarks/results (the test extra's chunk packages)."""
    from tests.helpers.models import build_instruct

    folder = ROOT / "benchmarks" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    model = build_instruct(folder)
    if model is None:
        raise SystemExit("Qwen2.5-Coder 0.5B's chunk packages (the test extra) are not installed: give --model PATH.")
    return model


def peer_home(model: Path, threads: int, port: int) -> tuple[Path, str]:
    """A second Kestrel's home: the model referenced in place (not copied) as its default, greedy, the same
    threads, its API server's port and key."""
    from app.core.paths import DataPaths
    from app.core.server_settings import ServerSettings
    from app.core.settings import Settings, SettingsFile
    from app.library.models import ModelLibrary

    home = Path(tempfile.mkdtemp(prefix="kestrel-remote-bench-peer "))
    paths = DataPaths(home / "data", home / "config", home / "cache", home / "logs").ensure()
    installed = ModelLibrary(paths.models).add_reference(model)
    SettingsFile(paths.settings_file).save(Settings(
        default_model=installed.id, threads=threads, server=ServerSettings(enabled=False, port=port, key=KEY),
        generation=GenerationSettings(context_length=CONTEXT, temperature=0.0, seed=1)))
    return home, installed.id


@contextmanager
def remote_server(kind: str, model: Path, threads: int) -> Iterator[tuple[str, str]]:
    """The server on a free port: its base URL and the model's id there."""
    port = free_port()
    if kind == "llama":
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", "model",
                   "--port", str(port), "--n_ctx", str(CONTEXT), "--n_threads", str(threads), "--api_key", KEY]
        with running(command, port, "llama_cpp.server"):
            yield f"http://127.0.0.1:{port}", "model"
        return
    home, model_id = peer_home(model, threads, port)
    with running([sys.executable, "-m", "app", "serve", "--port", str(port)], port, "kestrel serve",
                 {"KESTREL_HOME": str(home)}):
        yield f"http://127.0.0.1:{port}", model_id


def question(number: int) -> str:
    """The prompt, numbered at its start: each run's is its own, so no side is handed a prompt the server
    (llama-cpp-python and Kestrel keep the last one's cache) has just read for another."""
    return f"({number:03d}) {PROMPT[0].content}"


def direct_run(url: str, model: str, tokens: int, text: str) -> dict[str, Any]:
    """One streamed chat read by the official openai client, its chunks timed as they arrive."""
    from openai import OpenAI

    client = OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=600)
    start = time.perf_counter()
    first = last = None
    pieces = 0
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}],
                                            max_tokens=tokens, temperature=0.0, seed=1, stream=True)
    for chunk in stream:
        now = time.perf_counter()
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or now
            last = now
            pieces += 1
    return _result(start, first, last, pieces)


async def engine_run(client: Any, tokens: int, text: str) -> dict[str, Any]:
    """One chat through Kestrel's engine (whatever it loaded), timed on the caller's side."""
    settings = GenerationSettings(temperature=0.0, max_tokens=tokens, seed=1, context_length=CONTEXT)
    await client.reset()
    start = time.perf_counter()
    first = last = None
    count = 0
    # No saved state: saving one after the answer would run on into the next side's run.
    async for event in client.generate((ChatMessage(Role.USER, text),), settings, keep_state=False):
        now = time.perf_counter()
        if isinstance(event, Delta) and event.text:
            first = first or now
            last = now
        elif isinstance(event, Done):
            count = event.stats.tokens
    return _result(start, first, last, count)


def _result(start: float, first: float | None, last: float | None, count: int) -> dict[str, Any]:
    span = (last - first) if first is not None and last is not None else 0.0
    return {"ttft_ms": (first - start) * 1000 if first is not None else None, "tokens": count,
            "tokens_per_s": (count - 1) / span if span > 0 and count > 1 else None}


@contextmanager
def kestrel_home() -> Iterator[Path]:
    """This side's Kestrel home (the engine process reads its servers list and keys from it)."""
    home = Path(tempfile.mkdtemp(prefix="kestrel-remote-bench "))
    before = os.environ.get("KESTREL_HOME")
    os.environ["KESTREL_HOME"] = str(home)
    try:
        yield home
    finally:
        if before is None:
            del os.environ["KESTREL_HOME"]
        else:
            os.environ["KESTREL_HOME"] = before


async def measure(url: str, model_id: str, kind: str, model: Path, args: argparse.Namespace) -> dict[str, list]:
    """The three sides' runs, interleaved; each side warmed once first (its model loaded, its template read)."""
    from app.core.paths import data_paths
    from app.library.servers.book import ServerBook
    from app.library.servers.records import ServerKind, remote_address
    from app.service.models.client import EngineClient

    ServerBook.at(data_paths().ensure()).add(SERVER, url, ServerKind(kind), KEY)
    through, local = EngineClient(), EngineClient()
    sides: dict[str, list] = {"server direct": [], "through kestrel": [], "local": []}
    try:
        await through.load(remote_address(SERVER, model_id), context_length=CONTEXT)
        await local.load(str(model), context_length=CONTEXT, threads=args.threads)
        runs: dict[str, Callable[[str], Any]] = {
            "server direct": lambda text: asyncio.to_thread(direct_run, url, model_id, args.tokens, text),
            "through kestrel": lambda text: engine_run(through, args.tokens, text),
            "local": lambda text: engine_run(local, args.tokens, text)}
        numbers = iter(range(1000))
        for run in runs.values():
            await run(question(next(numbers)))  # warm
        order = list(runs)
        for round_ in range(args.runs):
            for side in order[round_ % 3:] + order[:round_ % 3]:  # each side takes each place in turn
                sides[side].append(await runs[side](question(next(numbers))))
    finally:
        await through.shutdown()
        await local.shutdown()
    return sides


def median(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", choices=["llama", "kestrel"], default="llama")
    parser.add_argument("--kind", choices=["openai", "ollama", "anthropic", "kestrel"], default=None,
                        help="the API Kestrel speaks to it in (default: openai; a Kestrel peer takes any)")
    parser.add_argument("--model", type=Path, help="a GGUF file (default: Qwen2.5-Coder 0.5B Instruct)")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "remote.json")
    args = parser.parse_args()
    kind = args.kind or "openai"
    if args.server == "llama" and kind != "openai":
        parser.error("llama-cpp-python's server speaks OpenAI's API only: --kind openai, or --server kestrel")
    model = args.model or instruct_model()
    with remote_server(args.server, model, args.threads) as (url, model_id), kestrel_home():
        sides = asyncio.run(measure(url, model_id, kind, model, args))
    summary = {side: {"tokens_per_s": median(rows, "tokens_per_s"), "ttft_ms": median(rows, "ttft_ms")}
               for side, rows in sides.items()}
    direct, through = summary["server direct"], summary["through kestrel"]
    goals = {"tokens_per_s_ratio": through["tokens_per_s"] / direct["tokens_per_s"],
             "ttft_added_ms": through["ttft_ms"] - direct["ttft_ms"]}
    goals["goal_met"] = bool(goals["tokens_per_s_ratio"] >= 0.97 and goals["ttft_added_ms"] < 30)
    server = "llama_cpp.server" if args.server == "llama" else "kestrel serve"
    print(f"model {model.name} on {server} as {kind}, {args.tokens} tokens, {args.runs} runs, "
          f"{args.threads} threads (medians)")
    print(f"{'side':<16} {'tokens/s':>9} {'TTFT ms':>9}")
    for side, row in summary.items():
        print(f"{side:<16} {row['tokens_per_s']:>9.1f} {row['ttft_ms']:>9.1f}")
    print(f"through kestrel / server direct tokens/s {goals['tokens_per_s_ratio']:.3f} (goal >= 0.97); first token "
          f"{goals['ttft_added_ms']:+.1f} ms (goal < 30)")
    print("goals " + ("met" if goals["goal_met"] else "NOT met"))
    report = {"model": str(model), "server": server, "kind": kind, "tokens": args.tokens, "runs": args.runs,
              "threads": args.threads, "machine": platform.platform(), "python": platform.python_version(),
              "runs_by_side": sides, "summary": summary, **goals}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
