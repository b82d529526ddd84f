"""Reopening a long chat: time to the first token cold vs from a saved state in RAM or on disk.

    python benchmarks/reopen.py [--model PATH] [--tokens 3000] [--runs 3] [--json OUT]

A conversation of about --tokens tokens is built from real text (the project's design
notes and README, split into turns) and answered through the app's EngineClient, in a
real engine process, as the window does. Then the next question of that chat is timed
from calling generate to the first Delta:

- cold: the state folder emptied and a fresh engine: the whole chat is evaluated again;
- disk: a fresh engine whose folder holds the state the previous engine saved;
- RAM: the same engine, after a second long chat was answered in between.

It also reports the saved state's size against the KV-cache bytes of its tokens
(2 x layers x KV heads x head size x 2 bytes x tokens; a sliding-window layer keeps only
its window), switching back and forth between two long chats with and without saved
states, and the disk and RAM the states take per 1,000 tokens.
Goals (issue 15): restored from disk <= 5% of cold; a state <= 1.2x the KV bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.generation import GenerationSettings  # noqa: E402
from app.engine.backends.llama import kv_state  # noqa: E402
from app.engine.templates.chat_format import ModelTokens, build_prompt  # noqa: E402
from app.engine.protocol import ChatMessage, Delta, Done  # noqa: E402
from app.engine.backends.resources import default_threads  # noqa: E402
from app.engine.backends.llama.state_store import RAM_BUDGET, clear_folder  # noqa: E402
from app.library.model_files.gguf_info import read_gguf_info  # noqa: E402
from app.service.models.client import EngineClient  # noqa: E402
from benchmarks.throughput import starter_model  # noqa: E402

CONTEXT = 4096
ANSWER_TOKENS = 32
DISK_BUDGET = 2 * 1024 ** 3
SOURCES = (ROOT / "docs" / "design.md", ROOT / "README.md")
FOLLOW_UPS = ("Which part of that matters most, and why?", "Say it again for someone new to the project.",
              "What would you change first?", "Give one example.")
# Layers of a sliding-window model that attend to everything: every n-th (llama.cpp's pattern).
SWA_PATTERN = {"gemma3": 6, "gemma3n": 5, "cohere2": 4}


# --- the conversations ---------------------------------------------------------------

def paragraphs() -> list[str]:
    """Prose paragraphs of the project's own documents, in order (no code, tables or headings)."""
    found = []
    for source in SOURCES:
        text = re.sub(r"```.*?```", "", source.read_text(encoding="utf-8"), flags=re.S)
        for block in re.split(r"\n\s*\n", text):
            block = " ".join(line.strip() for line in block.splitlines())
            if len(block) > 200 and not block.startswith(("#", "|", "    ")):
                found.append(block)
    return found


def build_chats(model: Path, target: int, count: int) -> list[list[ChatMessage]]:
    """count conversations of about target tokens each, from consecutive paragraphs, ending
    with a question for the model."""
    import llama_cpp

    info = read_gguf_info(model)
    vocab = llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False)
    bos = vocab._model.token_get_text(vocab.token_bos())

    def length(messages: list[ChatMessage]) -> int:
        spec = build_prompt(messages, template=info.chat_template, architecture=info.architecture,
                            tokens=ModelTokens(bos=bos, eos=""))
        return len(vocab.tokenize(spec.text.encode(), add_bos=not spec.text.startswith(bos), special=True))

    pool = paragraphs()
    chats = []
    for _ in range(count):
        messages: list[ChatMessage] = []
        while pool and length(messages + [_question()]) < target:
            notes = pool.pop(0)
            if len(messages) % 2 == 0:
                messages.append(ChatMessage("user", f"Here is the next part of my notes:\n\n{notes}"))
            else:
                messages.append(ChatMessage("assistant", notes))
        if len(messages) % 2 == 1:
            messages.append(ChatMessage("assistant", "Noted."))
        chats.append(messages + [_question()])
    vocab.close()
    return chats


def _question() -> ChatMessage:
    return ChatMessage("user", "Summarise these notes in three sentences.")


# --- the engine ----------------------------------------------------------------------

class Engine:
    """One engine process with the model loaded, states in `folder` (or none)."""

    def __init__(self, model: Path, folder: Path | None, threads: int) -> None:
        self.model, self.folder, self.threads = model, folder, threads
        self.client = EngineClient()

    async def __aenter__(self) -> "Engine":
        states = self.folder is not None
        await self.client.load(str(self.model), context_length=CONTEXT, threads=self.threads,
                               state_ram_bytes=RAM_BUDGET if states else 0,
                               state_dir=str(self.folder) if states else None,
                               state_disk_bytes=DISK_BUDGET if states else 0)
        return self

    async def __aexit__(self, *exc) -> None:
        # The engine finishes its queued state files before it exits.
        await self.client.shutdown(timeout=30)

    async def ask(self, messages: list[ChatMessage]) -> tuple[dict, str]:
        settings = GenerationSettings(temperature=0.0, max_tokens=ANSWER_TOKENS, seed=1, context_length=CONTEXT)
        start = time.perf_counter()
        first = None
        text = ""
        stats = None
        async for event in self.client.generate(messages, settings):
            if isinstance(event, Delta):
                first = first or time.perf_counter()
                text += event.text
            elif isinstance(event, Done):
                stats = event.stats
        assert stats is not None
        return {"ttft_ms": (first - start) * 1000 if first else None, "prompt_tokens": stats.prompt_tokens,
                "evaluated": stats.prompt_tokens_evaluated}, text


def follow_up(messages: list[ChatMessage], answer: str, question: str) -> list[ChatMessage]:
    return messages + [ChatMessage("assistant", answer), ChatMessage("user", question)]


# --- the measurements -----------------------------------------------------------------

async def reopen_run(model: Path, chat: list[ChatMessage], other: list[ChatMessage], folder: Path,
                     threads: int) -> dict:
    """One round of cold, disk and RAM for the follow-up of chat; also the state's size."""
    clear_folder(folder)
    async with Engine(model, folder, threads) as engine:
        _, answer = await engine.ask(chat)
    state = state_files(folder)
    nxt = follow_up(chat, answer, FOLLOW_UPS[0])
    clear_folder(folder)
    async with Engine(model, folder, threads) as engine:
        cold, _ = await engine.ask(nxt)
    # The state of chat's answer, on disk for a fresh engine.
    clear_folder(folder)
    async with Engine(model, folder, threads) as engine:
        await engine.ask(chat)
    async with Engine(model, folder, threads) as engine:
        disk, _ = await engine.ask(nxt)
        # The first answer again, evaluated from nothing as at first so that it is the same
        # answer (its state goes to RAM), another long chat, then the follow-up.
        await engine.client.reset()
        await engine.ask(chat)
        await engine.ask(other)
        ram, _ = await engine.ask(nxt)
    return {"cold": cold, "disk": disk, "ram": ram, "state": state}


def state_files(folder: Path) -> list[dict]:
    rows = []
    for path in sorted(folder.glob(f"*{kv_state.SUFFIX}")):
        header = kv_state.read_header(path)
        if header is not None:
            rows.append({"tokens": len(header.tokens), "state_bytes": header.state_bytes,
                         "file_bytes": path.stat().st_size, "window_only": header.whole_prefix_only})
    return rows


async def switching(model: Path, chats: list[list[ChatMessage]], folder: Path | None, threads: int,
                    rounds: int) -> list[dict]:
    """Answer both chats, then go back and forth rounds times: TTFT of each answer."""
    if folder is not None:
        clear_folder(folder)
    rows = []
    talks = [list(chat) for chat in chats]
    async with Engine(model, folder, threads) as engine:
        for turn in range(rounds + 1):
            for index, talk in enumerate(talks):
                result, answer = await engine.ask(talk)
                rows.append({"chat": "AB"[index], "turn": turn, **result})
                talks[index] = follow_up(talk, answer, FOLLOW_UPS[turn % len(FOLLOW_UPS)])
    return rows


def kv_bytes(model: Path, tokens: int) -> dict:
    """The KV-cache bytes of tokens at f16: every layer, and as the engine keeps them.

    Kestrel loads sliding-window models with llama.cpp's full-size window cache
    (swa_full), so every layer keeps every token and a saved state can be cut back to any
    prefix (issue 28); `window_only` is what a window-size cache would keep, for comparison.
    """
    info = read_gguf_info(model)
    meta, arch = info.metadata, info.architecture
    layers, heads = info.block_count or 0, info.head_count or 1
    key = int(meta.get(f"{arch}.attention.key_length") or (info.embedding_length or 0) // heads)
    value = int(meta.get(f"{arch}.attention.value_length") or key)
    per_layer_token = (info.head_count_kv or heads) * (key + value) * 2
    window = int(meta.get(f"{arch}.attention.sliding_window") or 0)
    pattern = SWA_PATTERN.get(arch, 0)
    full_layers = layers // pattern if window and pattern else layers
    swa_layers = layers - full_layers
    window_only = per_layer_token * (full_layers * tokens + swa_layers * min(tokens, window))
    all_layers = per_layer_token * layers * tokens
    return {"all_layers": all_layers, "kept": all_layers, "window_only": window_only, "full_layers": full_layers,
            "swa_layers": swa_layers, "window": window}


# --- the report ------------------------------------------------------------------------

def summarize(runs: list[dict], model: Path) -> dict:
    med = lambda key: statistics.median(r[key]["ttft_ms"] for r in runs)  # noqa: E731
    cold, disk, ram = med("cold"), med("disk"), med("ram")
    state = runs[0]["state"][0] if runs[0]["state"] else None
    summary = {"cold_ms": cold, "disk_ms": disk, "ram_ms": ram, "disk_share": disk / cold, "ram_share": ram / cold,
               "prompt_tokens": runs[0]["cold"]["prompt_tokens"],
               "evaluated": {k: [r[k]["evaluated"] for r in runs] for k in ("cold", "disk", "ram")}}
    if state:
        kv = kv_bytes(model, state["tokens"])
        per_k = 1000 / state["tokens"]
        summary["state"] = {**state, "kv": kv, "vs_kept": state["state_bytes"] / kv["kept"],
                            "vs_all_layers": state["state_bytes"] / kv["all_layers"],
                            "disk_per_1000_tokens": state["file_bytes"] * per_k,
                            "ram_per_1000_tokens": state["state_bytes"] * per_k}
        summary["goal_state_met"] = state["state_bytes"] <= 1.2 * kv["kept"]
    summary["goal_disk_met"] = disk <= 0.05 * cold
    return summary


def print_tables(summary: dict, switch: dict, model: Path, args) -> None:
    mb = 1024 * 1024
    print(f"model {model.name}, chat of {summary['prompt_tokens']} tokens before the follow-up, context {CONTEXT}, "
          f"{args.threads} threads, {args.runs} runs (medians)")
    print(f"{'next answer':<22} {'TTFT ms':>9} {'of cold':>8} {'evaluated':>10}")
    for name, key in (("cold (re-evaluate)", "cold"), ("restored from RAM", "ram"), ("restored from disk", "disk")):
        ms = summary[f"{key}_ms"]
        print(f"{name:<22} {ms:>9.0f} {ms / summary['cold_ms']:>8.1%} "
              f"{statistics.median(summary['evaluated'][key]):>10.0f}")
    print(f"goal: disk <= 5% of cold: {'met' if summary['goal_disk_met'] else 'NOT met'} "
          f"({summary['disk_share']:.1%})")
    state = summary.get("state")
    if state:
        kv = state["kv"]
        print(f"\nsaved state of {state['tokens']} tokens: {state['state_bytes'] / mb:.1f} MiB (file "
              f"{state['file_bytes'] / mb:.1f} MiB); KV of those tokens as the engine keeps them (every layer, "
              f"every token: swa_full): {kv['kept'] / mb:.1f} MiB -> {state['vs_kept']:.2f}x "
              f"(goal <= 1.2x: {'met' if summary['goal_state_met'] else 'NOT met'}); a window-size cache "
              f"({kv['full_layers']} full layers, {kv['swa_layers']} sliding-window layers of {kv['window']}) "
              f"would keep {kv['window_only'] / mb:.1f} MiB")
        print(f"per 1,000 tokens at this length: disk {state['disk_per_1000_tokens'] / mb:.2f} MiB, "
              f"RAM {state['ram_per_1000_tokens'] / mb:.2f} MiB")
    print("\nswitching between two long chats (TTFT ms of each answer; turn 0 is the first answer)")
    print(f"{'chat':<5} {'turn':>4} {'prompt':>7} {'saved states':>13} {'evaluated':>10} {'none':>8} {'evaluated':>10}")
    for on, off in zip(switch["with_states"], switch["without_states"]):
        print(f"{on['chat']:<5} {on['turn']:>4} {on['prompt_tokens']:>7} {on['ttft_ms']:>13.0f} "
              f"{on['evaluated']:>10} {off['ttft_ms']:>8.0f} {off['evaluated']:>10}")


async def measure(model: Path, args) -> dict:
    folder = ROOT / "benchmarks" / "results" / "reopen-states"
    folder.mkdir(parents=True, exist_ok=True)
    chats = build_chats(model, args.tokens, 3)
    runs = []
    for _ in range(args.runs):
        runs.append(await reopen_run(model, chats[0], chats[2], folder, args.threads))
    switch = {"with_states": await switching(model, chats[:2], folder, args.threads, args.rounds),
              "without_states": await switching(model, chats[:2], None, args.threads, args.rounds)}
    shutil.rmtree(folder, ignore_errors=True)
    return {"runs": runs, "switching": switch}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the starter model)")
    parser.add_argument("--tokens", type=int, default=3000, help="the chat's length before the follow-up")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="back-and-forth rounds when switching")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "reopen.json")
    args = parser.parse_args()
    model = args.model or starter_model()
    measured = asyncio.run(measure(model, args))
    summary = summarize(measured["runs"], model)
    print_tables(summary, measured["switching"], model, args)
    report = {"model": str(model), "tokens": args.tokens, "runs": args.runs, "threads": args.threads,
              "context": CONTEXT, "machine": platform.platform(), "python": platform.python_version(),
              "date": time.strftime("%Y-%m-%d"), **measured, **summary}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
