"""After tools, an answer: the real API clients and the chat path on real Qwen2.5-Coder models.

    python benchmarks/tool_answers.py --model 0.5b=qwen0.5b.gguf --model 1.5b=qwen1.5b.gguf \
        [--before TREE] [--clients-python /tmp/clients/bin/python] [--json OUT]

API: `kestrel serve` (a real process on 127.0.0.1, from this interpreter) with each model; each
client (openai, anthropic, langchain-openai, litellm, llm, pydantic-ai) asks "What's the weather
in Paris?" with a get_weather tool, without and with a system prompt, greedy. A right call names
get_weather with city Paris; the client then sends the tool's result ("22 °C, sunny") and the
final answer is judged: text (words), a call copy written as text (`{"name": "get_weather"...}`
in the words), a call again (the client would run it again), or empty. llm and pydantic-ai run
the tool loop themselves: their tool returns the result, and a second call ends the run (llm:
the answer after the result holds a call; pydantic-ai: its request limit of 2 is passed).

--clients-python PY: each client's part runs in that interpreter (`PY this_script --ask CLIENT
...`), so the clients need not be installed beside Kestrel (`python3 -m venv /tmp/clients &&
/tmp/clients/bin/pip install langchain-openai litellm llm pydantic-ai openai anthropic`); without
it, the clients importable here are used and the others named as missing.

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
        # Installed by reference, so that /v1/models names it: llm sends a model name, never "".
        subprocess.run([sys.executable, "-m", "app", "models", "add", "--reference", str(model)], cwd=tree, env=env,
                       check=True, capture_output=True, timeout=300)
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


def _openai(address: str, key: str, model: str, system: str | None) -> dict[str, Any]:
    import openai

    client = openai.OpenAI(base_url=f"{address}/v1", api_key=key, timeout=600)
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


def _anthropic(address: str, key: str, model: str, system: str | None) -> dict[str, Any]:
    import anthropic

    client = anthropic.Anthropic(base_url=address, api_key=key, timeout=600)
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


def _paris(name: str, arguments: Any) -> bool:
    if isinstance(arguments, str):
        arguments = json.loads(arguments or "{}")
    return name == "get_weather" and str(arguments.get("city", "")).lower() == "paris"


def _langchain_openai(address: str, key: str, model: str, system: str | None) -> dict[str, Any]:
    from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model=model, base_url=f"{address}/v1", api_key=key, temperature=0,  # type: ignore[arg-type]
                      timeout=600).bind_tools([WEATHER])
    messages: list[BaseMessage] = ([SystemMessage(system)] if system else []) + [HumanMessage(QUESTION)]
    first = chat.invoke(messages)
    calls = first.tool_calls  # type: ignore[attr-defined]
    row: dict[str, Any] = {"call_right": bool(calls) and _paris(calls[0]["name"], calls[0]["args"])}
    if not calls:
        return {**row, "final": "no call made", "final_text": str(first.content)}
    messages += [first] + [ToolMessage(RESULT, tool_call_id=c["id"]) for c in calls]
    after = chat.invoke(messages)
    text = after.content if isinstance(after.content, str) else str(after.content)
    return {**row, "final": "call again" if after.tool_calls else _judge_text(text),  # type: ignore[attr-defined]
            "final_text": text}


def _litellm(address: str, key: str, model: str, system: str | None) -> dict[str, Any]:
    import litellm

    messages: list[Any] = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": QUESTION}]
    ask = dict(model=f"openai/{model}", api_base=f"{address}/v1", api_key=key, tools=[WEATHER], temperature=0,
               timeout=600)
    first = litellm.completion(messages=messages, **ask).choices[0].message  # type: ignore[union-attr]
    calls = first.tool_calls or []
    row: dict[str, Any] = {"call_right": bool(calls) and _paris(calls[0].function.name, calls[0].function.arguments)}
    if not calls:
        return {**row, "final": "no call made", "final_text": first.content or ""}
    messages += [{"role": "assistant", "content": first.content, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
        for c in calls]}] + [{"role": "tool", "tool_call_id": c.id, "content": RESULT} for c in calls]
    after = litellm.completion(messages=messages, **ask).choices[0].message  # type: ignore[union-attr]
    text = after.content or ""
    return {**row, "final": "call again" if after.tool_calls else _judge_text(text), "final_text": text}


def _llm(address: str, key: str, model: str, system: str | None) -> dict[str, Any]:
    import yaml  # llm's own dependency

    home = Path(tempfile.mkdtemp(prefix="llm-home-"))
    os.environ["LLM_USER_PATH"] = str(home)
    (home / "extra-openai-models.yaml").write_text(yaml.safe_dump([{
        "model_id": "kestrel", "model_name": model, "api_base": f"{address}/v1", "api_key_name": "kestrel",
        "supports_tools": True}]), encoding="utf-8")
    (home / "keys.json").write_text(json.dumps({"kestrel": key}), encoding="utf-8")
    import llm

    def get_weather(city: str) -> str:
        """The weather in a city"""
        return RESULT

    conversation = llm.get_model("kestrel").conversation()
    first = conversation.prompt(QUESTION, system=system, tools=[get_weather], options={"temperature": 0})
    first.text()
    calls = first.tool_calls()
    row: dict[str, Any] = {"call_right": bool(calls) and _paris(calls[0].name, calls[0].arguments)}
    if not calls:
        return {**row, "final": "no call made", "final_text": first.text()}
    after = conversation.prompt(tools=[get_weather], tool_results=first.execute_tool_calls(),
                                options={"temperature": 0})
    text = after.text()
    return {**row, "final": "call again" if after.tool_calls() else _judge_text(text), "final_text": text}


def _pydantic_ai(address: str, key: str, model: str, system: str | None) -> dict[str, Any]:
    from pydantic_ai import Agent, ToolCallPart, UsageLimitExceeded
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    agent = Agent(OpenAIChatModel(model, provider=OpenAIProvider(base_url=f"{address}/v1", api_key=key)),
                  system_prompt=system or (), model_settings={"temperature": 0})
    ran: list[str] = []

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city"""
        ran.append(city)
        return RESULT

    try:  # two requests: the call, then the answer after its result; a third would be a call again
        result = agent.run_sync(QUESTION, usage_limits=UsageLimits(request_limit=2))
    except UsageLimitExceeded:
        return {"call_right": bool(ran) and ran[0].lower() == "paris", "final": "call again", "final_text": ""}
    calls = [part for message in result.all_messages() for part in getattr(message, "parts", ())
             if isinstance(part, ToolCallPart)]
    row = {"call_right": bool(calls) and _paris(calls[0].tool_name, calls[0].args or {})}
    text = str(result.output)
    return {**row, "final": _judge_text(text) if calls else "no call made", "final_text": text}


ASKERS = {"openai": _openai, "anthropic": _anthropic, "langchain_openai": _langchain_openai, "litellm": _litellm,
          "llm": _llm, "pydantic_ai": _pydantic_ai}


def _ask(client: str, address: str, key: str, model: str, system: str | None,
         python: str | None) -> dict[str, Any]:
    """One client's row: here, or in the clients' own interpreter (python)."""
    if python is None:
        return ASKERS[client](address, key, model, system)
    done = subprocess.run([python, __file__, "--ask", client, "--address", address, "--key", key,
                           "--model-id", model, *(["--system", system] if system else [])],
                          text=True, capture_output=True, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"{client} in {python}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
    return dict(json.loads(lines[-1]))


def available(python: str | None) -> list[str]:
    """The clients importable here, or in the clients' interpreter."""
    if python is None:
        return [c for c in CLIENTS if importlib.util.find_spec(c) is not None]
    probe = "import importlib.util, json; print(json.dumps([c for c in %r if importlib.util.find_spec(c)]))" % (
        list(CLIENTS),)
    return list(json.loads(subprocess.run([python, "-c", probe], text=True, capture_output=True,
                                          check=True).stdout))


def api_rows(tree: Path, label: str, models: dict[str, Path], clients: list[str],
             python: str | None = None) -> list[dict[str, Any]]:
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
                            row = _ask(client, server.address, server.key, model, system, python)
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
    parser.add_argument("--model", action="append", help="NAME=PATH of a GGUF (repeat)")
    parser.add_argument("--before", type=Path, help="another tree holding app/ (the code before the change)")
    parser.add_argument("--skip-api", action="store_true", help="only the chat path")
    parser.add_argument("--skip-after", action="store_true", help="only the --before tree")
    parser.add_argument("--chat-model", default="1.5b", help="the model NAME the chat path runs on")
    parser.add_argument("--clients-python", help="the interpreter each client's part runs in")
    parser.add_argument("--ask", choices=CLIENTS, help=argparse.SUPPRESS)  # one client's part, in that interpreter
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--model-id", default="", help=argparse.SUPPRESS)
    parser.add_argument("--system", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" /
                        f"tool_answers-{datetime.date.today()}.json")
    args = parser.parse_args()
    if args.ask:
        print(json.dumps(ASKERS[args.ask](args.address, args.key, args.model_id, args.system), ensure_ascii=False))
        return
    if not args.model:
        parser.error("--model NAME=PATH is needed")
    models = {name: Path(path) for name, _, path in (m.partition("=") for m in args.model)}
    clients = available(args.clients_python)
    missing = [c for c in CLIENTS if c not in clients]
    trees = ([("before", args.before)] if args.before else []) + ([] if args.skip_after else [("after", ROOT)])
    api: list[dict[str, Any]] = []
    chat: list[dict[str, Any]] = []
    for label, tree in trees:
        api += [] if args.skip_api else api_rows(tree, label, models, clients, args.clients_python)
        if args.chat_model in models:
            chat.append(chat_row(tree, label, args.chat_model, models[args.chat_model]))
            print(json.dumps(chat[-1], ensure_ascii=False), file=sys.stderr, flush=True)
    print(f"clients used: {', '.join(clients)}; not installed: {', '.join(missing) or 'none'}")
    print(f"{'tree':7} {'model':6} {'client':16} {'system':7} {'call right':11} final answer")
    for row in api:
        print(f"{row['tree']:7} {row['model']:6} {row['client']:16} {'yes' if row['system_prompt'] else 'no':7} "
              f"{'yes' if row['call_right'] else 'no':11} {row['final']}: {row['final_text'][:60]!r}")
    print(f"\n{'tree':7} {'model':6} {'calls':6} {'errors':7} {'repeats not run':16} final answer")
    for row in chat:
        print(f"{row['tree']:7} {row['model']:6} {len(row['calls']):<6} {row['results_errors']:<7} "
              f"{row['repeats_not_run']:<16} {row['final_chars']} chars: {row['final_text'][:70]!r}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(), "clients": clients,
                                     "clients_python": args.clients_python,
                                     "missing_clients": missing, "api": api, "chat": chat}, indent=1,
                                    ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwritten: {args.json}")


if __name__ == "__main__":
    main()
