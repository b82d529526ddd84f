"""The API server as a client sees it: tokens/s and time to first token through the OpenAI API.

    pip install 'llama-cpp-python[server]==0.3.36'   # once: llama-cpp-python's own server, to compare
    python benchmarks/api.py [--model PATH] [--tokens 128] [--runs 5] [--json OUT]

Four sides get the same model file, prompt, context, threads and greedy sampling:
- direct: llama-cpp-python in this process, as benchmarks/throughput.py calls it;
- kestrel serve: `python -m app serve` in its own home, read with the official `openai`
  client streaming (its chunks timed as they arrive, tokens from the usage chunk);
- window: the window (offscreen) with the server turned on in its settings, the same
  client: what the window's event loop and the engine's shared line add;
- llama_cpp.server: llama-cpp-python's own OpenAI server on the same model (its
  settings have no swa_full: for Gemma 3 it keeps the smaller sliding-window cache).
Goals: kestrel serve keeps >= 0.97 of direct tokens/s, adds < 30 ms to the first token,
and is at least as fast as llama_cpp.server. Also: requests/s for GET /v1/models.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.server_settings import ServerSettings  # noqa: E402
from app.core.settings import Settings, SettingsFile  # noqa: E402
from app.engine.backends.resources import default_threads  # noqa: E402
from benchmarks.throughput import CONTEXT, PROMPT, direct_runs, starter_model  # noqa: E402

KEY = "kestrel-benchmark-key"
READY_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode} before it listened")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{what} did not listen on {port} within {READY_S} s")


def kestrel_home(model: Path, port: int, *, enabled: bool, threads: int) -> tuple[Path, str]:
    """A fresh Kestrel home with the model installed as the default and the server's settings."""
    home = Path(tempfile.mkdtemp(prefix="kestrel-api-bench "))
    os.environ["KESTREL_HOME"] = str(home)
    try:
        from app.core.paths import data_paths
        from app.core.generation import GenerationSettings
        from app.library.importer import import_model_file
        from app.library.models import ModelLibrary

        paths = data_paths().ensure()
        installed = import_model_file(ModelLibrary(paths.models), model)
        server = ServerSettings(enabled=enabled, port=port, key=KEY)
        SettingsFile(paths.settings_file).save(Settings(
            default_model=installed.id, threads=threads, server=server,
            generation=GenerationSettings(context_length=CONTEXT, temperature=0.0, seed=1)))
    finally:
        del os.environ["KESTREL_HOME"]
    return home, installed.id


@contextmanager
def running(command: list[str], port: int, what: str, env: dict[str, str] | None = None) -> Iterator[None]:
    # stderr to a file, not a pipe: llama.cpp's load log alone fills a pipe nobody reads,
    # and the server then blocks before it listens.
    log = tempfile.NamedTemporaryFile(prefix="kestrel-api-bench-", suffix=".log", delete=False)
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log,
                               env=dict(os.environ, **(env or {})))
    try:
        try:
            wait_for(port, process, what)
        except SystemExit:
            print(Path(log.name).read_text(errors="replace")[-2000:], file=sys.stderr)
            raise
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def client_runs(port: int, model: str, tokens: int, runs: int, *, usage: bool = True) -> list[dict]:
    """Streaming chat completions read by the official openai client, timed per chunk."""
    from openai import OpenAI

    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0, timeout=300)
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                   temperature=0.0)  # warm: the model loaded, the template compiled
    results = []
    for _ in range(runs):
        start = time.perf_counter()
        first = last = None
        chunks = 0
        reported = None
        extra = {"stream_options": {"include_usage": True}} if usage else {}
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": PROMPT[0].content}], max_tokens=tokens,
            temperature=0.0, top_p=0.95, seed=1, stream=True, **extra)
        for chunk in stream:
            now = time.perf_counter()
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or now
                last = now
                chunks += 1
            if getattr(chunk, "usage", None) is not None:
                reported = chunk.usage.completion_tokens
        count = reported or chunks
        span = (last - first) if first and last else 0.0
        results.append({"ttft_ms": (first - start) * 1000 if first else None, "tokens": count,
                        "tokens_per_s": (count - 1) / span if span > 0 else 0.0})
    return results


def models_per_s(port: int, seconds: float = 3.0) -> float:
    """GET /v1/models over one kept-alive connection, as fast as it answers."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    count, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        connection.request("GET", "/v1/models", headers={"Authorization": f"Bearer {KEY}"})
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"/v1/models answered {response.status}")
        count += 1
    connection.close()
    return count / seconds


def llama_server_format(model: Path) -> list[str]:
    """llama_cpp.server's chat format for a GGUF without a template (the starter has none):
    its fallback is Llama 2's, and Gemma then ends every answer at once. Kestrel's
    built-in format for that architecture is the same turn markup as llama_cpp's "gemma"."""
    from app.library.model_files.gguf_info import read_gguf_info

    info = read_gguf_info(model)
    if info.chat_template is None and info.architecture.startswith("gemma"):
        return ["--chat_format", "gemma"]
    return []


def median(rows: list[dict], key: str) -> float:
    """The median of the runs that produced it (NaN when none did: the table shows it)."""
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the starter model)")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--skip-llama-server", action="store_true", help="when llama_cpp.server is not installed")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "api.json")
    args = parser.parse_args()
    model = args.model or starter_model()
    sides: dict[str, list[dict]] = {"direct": direct_runs(model, args.tokens, args.runs, args.threads)}
    rates: dict[str, float] = {}

    port = free_port()
    home, model_id = kestrel_home(model, port, enabled=False, threads=args.threads)
    with running([sys.executable, "-m", "app", "serve", "--port", str(port)], port, "kestrel serve",
                 {"KESTREL_HOME": str(home)}):
        sides["kestrel serve"] = client_runs(port, model_id, args.tokens, args.runs)
        rates["kestrel serve"] = models_per_s(port)

    port = free_port()
    home, model_id = kestrel_home(model, port, enabled=True, threads=args.threads)
    with running([sys.executable, "-m", "app"], port, "the window",
                 {"KESTREL_HOME": str(home), "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen")}):
        sides["window"] = client_runs(port, model_id, args.tokens, args.runs)
        rates["window"] = models_per_s(port)

    if not args.skip_llama_server:
        port = free_port()
        with running([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--port", str(port),
                      "--n_ctx", str(CONTEXT), "--n_threads", str(args.threads), "--api_key", KEY,
                      *llama_server_format(model)],
                     port, "llama_cpp.server"):
            sides["llama_cpp.server"] = client_runs(port, str(model), args.tokens, args.runs, usage=False)
            rates["llama_cpp.server"] = models_per_s(port)

    summary = {name: {"tokens_per_s": median(rows, "tokens_per_s"), "ttft_ms": median(rows, "ttft_ms")}
               for name, rows in sides.items()}
    direct, kestrel = summary["direct"], summary["kestrel serve"]
    goals = {
        "tokens_per_s_ratio": kestrel["tokens_per_s"] / direct["tokens_per_s"],
        "ttft_added_ms": kestrel["ttft_ms"] - direct["ttft_ms"],
        "window_ttft_added_ms": summary["window"]["ttft_ms"] - kestrel["ttft_ms"],
    }
    if "llama_cpp.server" in summary:
        goals["vs_llama_cpp_server"] = kestrel["tokens_per_s"] / summary["llama_cpp.server"]["tokens_per_s"]
    goals["goal_met"] = bool(goals["tokens_per_s_ratio"] >= 0.97 and goals["ttft_added_ms"] < 30
                             and goals.get("vs_llama_cpp_server", 1.0) >= 1.0)
    print(f"model {model.name}, {args.tokens} tokens, {args.runs} runs, {args.threads} threads (medians)")
    print(f"{'side':<18} {'tokens/s':>9} {'TTFT ms':>9} {'/v1/models per s':>17}")
    for name, row in summary.items():
        rate = f"{rates[name]:.0f}" if name in rates else "-"
        print(f"{name:<18} {row['tokens_per_s']:>9.1f} {row['ttft_ms']:>9.1f} {rate:>17}")
    print(f"kestrel serve / direct tokens/s {goals['tokens_per_s_ratio']:.3f} (goal >= 0.97); first token "
          f"{goals['ttft_added_ms']:+.1f} ms (goal < 30); the window adds {goals['window_ttft_added_ms']:+.1f} ms")
    if "vs_llama_cpp_server" in goals:
        print(f"kestrel serve / llama_cpp.server tokens/s {goals['vs_llama_cpp_server']:.3f} (goal >= 1.0)")
    print("goals " + ("met" if goals["goal_met"] else "NOT met"))
    report = {"model": str(model), "tokens": args.tokens, "runs": args.runs, "threads": args.threads,
              "machine": platform.platform(), "python": platform.python_version(), "runs_by_side": sides,
              "models_per_s": rates, "summary": summary, **goals}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
