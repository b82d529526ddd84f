"""Tool calls on a real instruct model: valid calls with and without the lazy grammar, and the added first-token time.

    python benchmarks/tools.py --model qwen-1.5b.gguf [--prompts 32] [--threads N] [--json OUT]

The model is offered six tools with the schemas the real MCP servers publish
(benchmarks/data/mcp_tools.json, recorded from mcp-server-time and
@modelcontextprotocol/server-filesystem's tools/list): get_current_time, convert_time,
read_text_file, list_directory, search_files, get_file_info. Each prompt needs one of them.
Each is answered through Kestrel's engine (EngineClient.generate with AnswerShape(tools=...),
tool_choice "auto", greedy) with the lazy call grammar (app/engine/backends/llama/lazy_grammar.py) on and
off (KESTREL_LAZY_TOOL_GRAMMAR=0 in a second engine process). An answer counts as good when
its first call names a right tool and its arguments validate against that tool's schema
(jsonschema); the table also says how many answers called anything and how many calls were
written but did not parse (given back as text with a note).

Time to first token: the same prompts answered on a cleared KV cache with the tools offered
and without them (the tools' block is evaluated with the prompt), and with tools on a warm
cache (the prompt before the question is cached, as in a chat after its first message).
The cost of one grammar switch (app/engine/backends/llama/lazy_grammar.py ends one Llama.generate and
starts another) is measured with llama-cpp-python directly: tokens generated one by one
with a restart before each, against an unbroken generate, after the same long prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.generation import GenerationSettings  # noqa: E402
from app.engine.backends.llama.lazy_grammar import SWITCH_VARIABLE  # noqa: E402
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, ToolCall  # noqa: E402
from app.engine.backends.resources import default_threads  # noqa: E402
from app.service.models.client import EngineClient  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "mcp_tools.json"
OFFERED = ("get_current_time", "convert_time", "read_text_file", "list_directory", "search_files", "get_file_info")
CONTEXT = 4096
READ, LIST, SEARCH = ("read_text_file",), ("list_directory",), ("search_files",)
NOW, CONVERT = ("get_current_time",), ("convert_time",)
# (prompt, the tools that answer it)
PROMPTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("What time is it in Tokyo right now?", NOW),
    ("What's the current time in New York?", NOW),
    ("Tell me the time in London.", NOW),
    ("Is it morning or evening in Sydney at the moment?", NOW),
    ("What is the date today in Los Angeles?", NOW),
    ("I need the current local time in Berlin.", NOW),
    ("What time is it now in Asia/Kolkata?", NOW),
    ("Quick: current time in São Paulo?", NOW),
    ("What's the time in UTC right now?", NOW),
    ("Convert 14:30 from Paris time to Tokyo time.", CONVERT),
    ("If it is 09:00 in New York, what time is it in London?", CONVERT),
    ("What is 18:45 Europe/Berlin in America/Chicago time?", CONVERT),
    ("My meeting is at 07:15 in Sydney. What time is that in Los Angeles?", CONVERT),
    ("Convert 23:00 UTC to Asia/Singapore.", CONVERT),
    ("When it's 12:00 in Dubai, what time is it in Toronto?", CONVERT),
    ("Translate 06:30 America/Denver into Europe/Madrid time.", CONVERT),
    ("Read the file /home/ana/notes/todo.txt and tell me what's in it.", READ),
    ("Show me the contents of /home/ana/project/README.md.", READ),
    ("What does /home/ana/project/setup.cfg say?", READ),
    ("Open /home/ana/notes/shopping.md and read it to me.", READ),
    ("Print the first 10 lines of /var/log/app/server.log.", READ),
    ("Can you read /home/ana/project/src/main.py?", READ),
    ("List the files in /home/ana/project.", LIST),
    ("What is inside the folder /home/ana/notes?", LIST),
    ("Show me the directory listing of /home/ana/photos/2025.", LIST),
    ("Which files and folders are in /home/ana/project/src?", LIST),
    ("List everything in /tmp/build.", LIST),
    ("Find all Python files under /home/ana/project.", SEARCH),
    ("Search /home/ana/notes for files matching *.md.", SEARCH),
    ("Are there any .log files anywhere in /var/log/app? Search for them.", SEARCH),
    ("Look for files named config.json under /home/ana.", SEARCH),
    ("Find every PDF in /home/ana/documents and its subfolders.", SEARCH),
)
GREEDY = GenerationSettings(max_tokens=160, temperature=0.0, seed=1, repeat_penalty=1.0)


def offered_tools() -> list[dict[str, Any]]:
    """The six tools in the transformers/OpenAI shape, with the servers' own schemas."""
    recorded = json.loads(DATA.read_text(encoding="utf-8"))["servers"]
    by_name = {tool["name"]: tool for server in recorded.values() for tool in server}
    return [{"type": "function", "function": {"name": name, "description": by_name[name]["description"],
                                              "parameters": by_name[name]["inputSchema"]}} for name in OFFERED]


def judged(calls: list[ToolCall], text: str, right: tuple[str, ...], schemas: dict[str, Any]) -> dict[str, Any]:
    """What one answer did: called anything, the right tool, with arguments that validate."""
    first = calls[0] if calls else None
    valid = False
    if first is not None and first.name in schemas:
        try:
            jsonschema.validate(json.loads(first.arguments), schemas[first.name])
            valid = True
        except jsonschema.ValidationError:
            pass
    return {"called": first is not None, "right_tool": first is not None and first.name in right,
            "valid": valid, "good": first is not None and first.name in right and valid,
            "unparsed": "[Kestrel: the model wrote a tool call" in text or "ended inside a tool call" in text,
            "calls": [(call.name, call.arguments) for call in calls], "text": text[:300]}


async def answer(client: EngineClient, prompt: str, tools: str | None,
                 settings: GenerationSettings = GREEDY) -> tuple[list[ToolCall], str, Done]:
    calls: list[ToolCall] = []
    text: list[str] = []
    done: Done | None = None
    shape = AnswerShape(tools=tools) if tools else None
    async for event in client.generate((ChatMessage("user", prompt),), settings, shape=shape):
        if isinstance(event, Delta):
            text.append(event.text)
            if event.tool_call is not None:
                calls.append(event.tool_call)
        elif isinstance(event, Done):
            done = event
    assert done is not None
    return calls, "".join(text), done


async def accuracy(model: Path, prompts: int, threads: int, lazy: bool,
                   settings: GenerationSettings) -> list[dict[str, Any]]:
    os.environ[SWITCH_VARIABLE] = "1" if lazy else "0"  # the engine process inherits it
    tools = offered_tools()
    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in tools}
    client = EngineClient()
    results = []
    try:
        await client.load(str(model), context_length=CONTEXT, threads=threads)
        for prompt, right in PROMPTS[:prompts]:
            calls, text, done = await answer(client, prompt, json.dumps(tools), settings)
            result = judged(calls, text, right, schemas)
            result.update(prompt=prompt, ttft_ms=done.stats.ttft_ms, tokens=done.stats.tokens,
                          total_ms=done.stats.total_ms, evaluated=done.stats.prompt_tokens_evaluated)
            results.append(result)
            print(f"  {'ok ' if result['good'] else 'BAD'} {prompt[:50]:50} {result['calls'] or result['text'][:60]!r}",
                  flush=True)
    finally:
        await client.shutdown()
    return results


async def first_token(model: Path, prompts: int, threads: int) -> dict[str, Any]:
    """TTFT on a cleared cache with and without the tools, and with tools on a warm cache."""
    os.environ[SWITCH_VARIABLE] = "1"
    tools = json.dumps(offered_tools())
    client = EngineClient()
    rows: dict[str, list[tuple[float, int]]] = {"cold, no tools": [], "cold, tools": [], "warm, tools": []}
    try:
        await client.load(str(model), context_length=CONTEXT, threads=threads)
        for prompt, _ in PROMPTS[:prompts]:
            for name, offered in (("cold, no tools", None), ("cold, tools", tools)):
                await client.reset()
                done = (await answer(client, prompt, offered))[2]
                rows[name].append((done.stats.ttft_ms, done.stats.prompt_tokens_evaluated))
            done = (await answer(client, prompt + " Thanks.", tools))[2]  # the tools' block is cached now
            rows["warm, tools"].append((done.stats.ttft_ms, done.stats.prompt_tokens_evaluated))
    finally:
        await client.shutdown()
    return {name: {"ttft_ms_median": round(statistics.median(t for t, _ in got), 1),
                   "evaluated_median": statistics.median(e for _, e in got)} for name, got in rows.items()}


def switch_cost(model: Path, threads: int, tokens: int = 16, rounds: int = 3) -> dict[str, float]:
    """ms per token generating straight on, and restarting Llama.generate before every token
    (as a grammar switch does), after the prompt with the tools: medians over the rounds."""
    import llama_cpp

    from app.engine.templates.chat_format import ModelTokens, build_prompt

    llm = llama_cpp.Llama(model_path=str(model), n_ctx=CONTEXT, n_threads=threads, verbose=False)
    try:
        text = build_prompt((ChatMessage("user", "List the files in /home/ana/project."),),
                            template=str(llm.metadata.get("tokenizer.chat_template")), architecture="qwen2",
                            tokens=ModelTokens(), tools=tuple(offered_tools())).text
        prompt = llm.tokenize(text.encode(), add_bos=False, special=True)
        sampling = dict(top_k=40, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0)
        times: dict[str, list[float]] = {"straight": [], "restarted": []}
        for _ in range(rounds):  # alternating, so drift on a shared machine hits both alike
            for side in times:
                llm.generate(prompt, **sampling).__next__()  # the prompt is evaluated (and cached) first
                so_far = list(prompt)
                started = time.perf_counter()
                if side == "restarted":
                    for _ in range(tokens):
                        stream = llm.generate(so_far, **sampling)
                        so_far.append(next(stream))
                        stream.close()
                else:
                    stream = llm.generate(so_far, **sampling)
                    for _ in range(tokens):
                        so_far.append(next(stream))
                    stream.close()
                times[side].append((time.perf_counter() - started) * 1000 / tokens)
        results: dict[str, float] = {side: round(statistics.median(got), 2) for side, got in times.items()}
        results["prompt_tokens"] = len(prompt)
        return results
    finally:
        llm.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--ttft-prompts", type=int, default=5)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy; else sampled, seeded per prompt")
    parser.add_argument("--skip-timing", action="store_true", help="only the share of valid calls")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    settings = GenerationSettings(max_tokens=160, temperature=args.temperature, seed=1, repeat_penalty=1.0)
    report: dict[str, Any] = {"model": args.model.name, "date": datetime.date.today().isoformat(),
                              "machine": f"{platform.machine()}, {os.cpu_count()} cores", "threads": args.threads,
                              "settings": (f"temperature {args.temperature} (seed 1)" if args.temperature else "greedy")
                              + ", max_tokens 160, tool_choice auto", "tools": list(OFFERED)}
    for lazy in (True, False):
        name = "lazy grammar" if lazy else "no grammar"
        print(f"{name}:", flush=True)
        results = asyncio.run(accuracy(args.model, args.prompts, args.threads, lazy, settings))
        report[name] = {"answers": len(results), **{key: sum(r[key] for r in results)
                                                    for key in ("good", "called", "right_tool", "valid", "unparsed")},
                        "results": results}
    if not args.skip_timing:
        report["first token"] = asyncio.run(first_token(args.model, args.ttft_prompts, args.threads))
        report["grammar switch"] = switch_cost(args.model, args.threads)
    print_table(report)
    suffix = f"-t{args.temperature:g}" if args.temperature else ""
    out = args.json or ROOT / "benchmarks" / "results" / f"tools-{args.model.stem}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"wrote {out}")
    return 0


def print_table(report: dict[str, Any]) -> None:
    print(f"\n{report['model']}, {report['machine']}, {report['threads']} threads, {report['settings']}")
    print(f"{'':14} {'good calls':>12} {'any call':>9} {'right tool':>11} {'args valid':>11} {'unparsed':>9}")
    for name in ("lazy grammar", "no grammar"):
        row = report[name]
        n = row["answers"]
        print(f"{name:14} {row['good']:>4}/{n} {100 * row['good'] / n:4.0f}% {row['called']:>9} "
              f"{row['right_tool']:>11} {row['valid']:>11} {row['unparsed']:>9}")
    if "first token" not in report:
        return
    print(f"\n{'first token':18} {'median ms':>10} {'evaluated':>10}")
    for name, row in report["first token"].items():
        print(f"{name:18} {row['ttft_ms_median']:>10} {row['evaluated_median']:>10}")
    switch = report["grammar switch"]
    print(f"\nms per token after a {switch['prompt_tokens']}-token prompt (median of rounds): straight "
          f"{switch['straight']}, restarting generate before each {switch['restarted']}")


if __name__ == "__main__":
    raise SystemExit(main())
