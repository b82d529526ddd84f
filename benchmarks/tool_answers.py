"""After tools, an answer: the real API clients and the chat path on real Qwen2.5-Coder models.

    python benchmarks/tool_answers.py --model 0.5b=qwen0.5b.gguf --model 1.5b=qwen1.5b.gguf \
        [--before TREE] [--json OUT]

API: `kestrel serve` (a real process on 127.0.0.1) with each model; each official client
installed in this environment (openai, anthropic; langchain-openai, litellm, llm and
pydantic-ai are named as missing when they are not) asks "What's the weather in Paris?" with a
get_weather tool, without and with a system prompt, greedy. A right call names get_weather with
city Paris; the client then sends the tool's result ("22 °C, sunny") and the final answer is
judged: text (words), a call copy written as text (`{"name": "get_weather"...}` in the words),
a call again (tool_calls / tool_use: the client would run it again), or empty.

Chat path: `kestrel chat --tools time --allow-tools get_current_time,convert_time --json` (the service core the window
uses) with the real mcp-server-time on the 1.5B model, "What time is it in Tokyo right now? Use
the tool.", greedy: the calls made, the repeats not run again, and whether the final text
after the last result is non-empty.

--before TREE: the same runs on another checkout of app/ (e.g. `git archive <commit> app |
tar -x -C TREE`), to print before/after side by side.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import threading
import queue
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ("openai", "anthropic", "langchain_openai", "litellm", "llm", "pydantic_ai")
QUESTION = "What's the weather in Paris?"
SYSTEM = "You are a helpful assistant."
RESULT = "22 °C, sunny"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
TOKYO = "What time is it in Tokyo right now? Use the tool."
COPY = re.compile(r'"name"\s*:\s*"get_weather"')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`kestrel serve --model PATH` from a tree, in a home of its own; stopped with Ctrl+C."""

    def __init__(self, tree: Path, model: Path, home: Path) -> None:
        env = dict(os.environ, KESTREL_HOME=str(home), PYTHONPATH=str(tree))
        self.process = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(_free_port()),
                                         "--model", str(model)], cwd=tree, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)
        threading.Thread(target=pump, daemon=True).start()
        seen: list[str] = []
        while True:
            line = lines.get(timeout=300)
            if line is None:
                raise RuntimeError(f"kestrel serve ended: {seen}")
            seen.append(line)
            if line.startswith("API key: "):
                self.key = line.removeprefix("API key: ")
                self.address = next(s for s in seen if s.startswith("Kestrel API server on ")).split(" on ", 1)[1]
                return

    def stop(self) -> None:
        self.process.send_signal(2)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _judge_text(text: str) -> str:
    if not text.strip():
        return "empty"
    return "call copy as text" if COPY.search(text) else "text"


def _openai(server: Server, model: str, system: str | None) -> dict[str, Any]:
    import openai

    client = openai.OpenAI(base_url=f"{server.address}/v1", api_key=server.key, timeout=600)
    messages: list[Any] = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": QUESTION}]
    first = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER], temperature=0)  # type: ignore[list-item]
    calls = first.choices[0].message.tool_calls or []
    right = len(calls) >= 1 and calls[0].function.name == "get_weather" and \
        json.loads(calls[0].function.arguments or "{}").get("city", "").lower() == "paris"
    row: dict[str, Any] = {"call_right": right, "first": first.choices[0].message.content or ""}
    if not calls:
        return {**row, "final": "no call made", "final_text": ""}
    messages += [{"role": "assistant", "content": first.choices[0].message.content, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
        for c in calls]}] + [{"role": "tool", "tool_call_id": c.id, "content": RESULT} for c in calls]
    after = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER], temperature=0)  # type: ignore[list-item]
    message = after.choices[0].message
    final = "call again" if message.tool_calls else _judge_text(message.content or "")
    return {**row, "final": final, "final_text": message.content or "",
            "finish_reason": after.choices[0].finish_reason}


def _anthropic(server: Server, model: str, system: str | None) -> dict[str, Any]:
    import anthropic

    client = anthropic.Anthropic(base_url=server.address, api_key=server.key, timeout=600)
    tools: Any = [{"name": "get_weather", "description": "The weather in a city",
                   "input_schema": WEATHER["function"]["parameters"]}]  # type: ignore[index]
    extra: Any = {"system": system} if system else {}
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    first = client.messages.create(model=model, max_tokens=300, messages=messages, tools=tools,
                                   extra_body={"temperature": 0}, **extra)
    used = [b for b in first.content if b.type == "tool_use"]
    right = bool(used) and used[0].name == "get_weather" and str(used[0].input.get("city", "")).lower() == "paris"  # type: ignore[union-attr]
    row: dict[str, Any] = {"call_right": right}
    if not used:
        return {**row, "final": "no call made", "final_text": ""}
    messages += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": RESULT}
                                              for b in used]}]
    after = client.messages.create(model=model, max_tokens=300, messages=messages, tools=tools,
                                   extra_body={"temperature": 0}, **extra)
    text = "".join(b.text for b in after.content if b.type == "text")
    final = "call again" if any(b.type == "tool_use" for b in after.content) else _judge_text(text)
    return {**row, "final": final, "final_text": text, "stop_reason": after.stop_reason}


ASKERS = {"openai": _openai, "anthropic": _anthropic}


def api_rows(tree: Path, label: str, models: dict[str, Path], clients: list[str]) -> list[dict[str, Any]]:
    rows = []
    for name, path in models.items():
        with tempfile.TemporaryDirectory() as home:
            server = Server(tree, path, Path(home))
            try:
                import openai
                listed = openai.OpenAI(base_url=f"{server.address}/v1", api_key=server.key).models.list().data
                model = listed[0].id if listed else ""  # a GGUF given by path is not installed: "" is the loaded one
                for client in clients:
                    for system in (None, SYSTEM):
                        began = time.monotonic()
                        try:
                            row = ASKERS[client](server, model, system)
                        except Exception as exc:  # noqa: BLE001 - a client's failure is a row, not the end
                            row = {"call_right": False, "final": f"error: {type(exc).__name__}: {exc}"[:200],
                                   "final_text": ""}
                        rows.append({"tree": label, "model": name, "client": client, "system_prompt": bool(system),
                                     "seconds": round(time.monotonic() - began, 1), **row})
                        print(json.dumps(rows[-1], ensure_ascii=False), file=sys.stderr, flush=True)
            finally:
                server.stop()
    return rows


def chat_row(tree: Path, label: str, name: str, model: Path) -> dict[str, Any]:
    """`kestrel chat` with mcp-server-time, as the window's service core answers."""
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, KESTREL_HOME=home, PYTHONPATH=str(tree))
        sys.path.insert(0, str(ROOT))
        from app.core.paths import HOME_ENV, data_paths
        from app.tools.mcp_config import McpServerConfig, write_mcp_config
        os.environ[HOME_ENV] = home  # data_paths() reads it: the mcp.json of this home
        config = data_paths().ensure().mcp_file
        del os.environ[HOME_ENV]
        write_mcp_config(config, [McpServerConfig("time", command=sys.executable,
                                                  args=("-m", "mcp_server_time", "--local-timezone", "UTC"))])
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "app", "chat", "--model", str(model), "--tools", "time",
                               "--allow-tools", "get_current_time,convert_time", "--json", "--temperature", "0", TOKYO], cwd=tree, env=env,
                              text=True, capture_output=True, timeout=1200)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    calls = [line for line in lines if line.get("type") == "tool_call"]
    results = [line for line in lines if line.get("type") == "tool_result"]
    last = max((i for i, line in enumerate(lines) if line.get("type") == "tool_result"), default=-1)
    final = "".join(line.get("text", "") for line in lines[last + 1:] if line.get("type") == "delta")
    return {"tree": label, "model": name, "path": "chat (kestrel chat, the window's core)", "exit": done.returncode,
            "seconds": round(time.monotonic() - began, 1),
            "calls": [f"{c['name']} {json.dumps(c.get('arguments'), ensure_ascii=False)}" for c in calls],
            "results_errors": sum(bool(r.get("is_error")) for r in results),
            "repeats_not_run": sum("not run again" in r.get("text", "") for r in results),
            "final_chars": len(final.strip()), "final_text": final.strip()[:400],
            "stderr_tail": done.stderr[-400:] if done.returncode else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, help="NAME=PATH of a GGUF (repeat)")
    parser.add_argument("--before", type=Path, help="another tree holding app/ (the code before the change)")
    parser.add_argument("--skip-api", action="store_true", help="only the chat path")
    parser.add_argument("--chat-model", default="1.5b", help="the model NAME the chat path runs on")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" /
                        f"tool_answers-{datetime.date.today()}.json")
    args = parser.parse_args()
    models = {name: Path(path) for name, _, path in (m.partition("=") for m in args.model)}
    present = [c for c in CLIENTS if importlib.util.find_spec(c) is not None]
    missing = [c for c in CLIENTS if c not in present or c not in ASKERS]
    clients = [c for c in present if c in ASKERS]
    trees = ([("before", args.before)] if args.before else []) + [("after", ROOT)]
    api: list[dict[str, Any]] = []
    chat: list[dict[str, Any]] = []
    for label, tree in trees:
        api += [] if args.skip_api else api_rows(tree, label, models, clients)
        if args.chat_model in models:
            chat.append(chat_row(tree, label, args.chat_model, models[args.chat_model]))
            print(json.dumps(chat[-1], ensure_ascii=False), file=sys.stderr, flush=True)
    print(f"clients used: {', '.join(clients)}; not installed: {', '.join(missing) or 'none'}")
    print(f"{'tree':7} {'model':6} {'client':10} {'system':7} {'call right':11} final answer")
    for row in api:
        print(f"{row['tree']:7} {row['model']:6} {row['client']:10} {'yes' if row['system_prompt'] else 'no':7} "
              f"{'yes' if row['call_right'] else 'no':11} {row['final']}: {row['final_text'][:60]!r}")
    print(f"\n{'tree':7} {'model':6} {'calls':6} {'errors':7} {'repeats not run':16} final answer")
    for row in chat:
        print(f"{row['tree']:7} {row['model']:6} {len(row['calls']):<6} {row['results_errors']:<7} "
              f"{row['repeats_not_run']:<16} {row['final_chars']} chars: {row['final_text'][:70]!r}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(), "clients": clients,
                                     "missing_clients": missing, "api": api, "chat": chat}, indent=1,
                                    ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwritten: {args.json}")


if __name__ == "__main__":
    main()
