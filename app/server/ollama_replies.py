"""Ollama's answer shapes: errors as {"error": "..."}, NDJSON lines, models as /api/tags describes them, timings.

As Ollama's API reference and its official client (ollama-python's _types.py) read them: a
stream is one JSON object a line, the last with "done": true, its done_reason and the counts
and durations (nanoseconds); a failure mid-stream is a line {"error": "..."}.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.core.answer_stats import AnswerStats
from app.engine.protocol import ToolCall
from app.server.errors import BadRequest
from app.server.runs import CLIENT_GONE, ClientGone, cut_short, outcome_of
from app.service.api.api_answers import ApiModel, ApiRefused

NDJSON = "application/x-ndjson"
# The Ollama release whose API this follows (think and format as a schema came by 0.9), for clients
# that check /api/version before using a feature.
OLLAMA_VERSION = "0.9.0"
# Kestrel's capability words in Ollama's.
_CAPABILITIES = {"tools": "tools", "reasoning": "thinking", "vision": "vision", "embedding": "embedding"}


def error(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    """Ollama's error body: {"error": "..."}, which the official client raises as ResponseError."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def guarded(request: Request, work: Callable[[], Awaitable[Response]]) -> Response:
    """work's response, or Ollama's error body for a refusal."""
    try:
        return await work()
    except BadRequest as problem:
        response = error(problem.status, problem.message)
        if problem.status == 408:  # the rest of its body may still come: no next request can follow it
            response.headers["Connection"] = "close"
        return response
    except ApiRefused as refused:
        return error(refused.status, refused.message, refused.retry_after)
    except ClientGone:
        outcome_of(request).status = CLIENT_GONE
        return Response(status_code=CLIENT_GONE)  # never read: the client has gone


def line(data: dict[str, Any]) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def now() -> str:
    """RFC 3339 in UTC, as Ollama writes created_at."""
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat().replace("+00:00", "Z")


class Clock:
    """When the request came and when its model was ready, for the done line's durations."""

    def __init__(self) -> None:
        self.begun = time.perf_counter_ns()
        self.ready = self.begun

    def started(self) -> None:
        self.ready = time.perf_counter_ns()

    def elapsed(self) -> int:
        return time.perf_counter_ns() - self.begun

    def timings(self, stats: AnswerStats) -> dict[str, Any]:
        """The done line's counts and durations in nanoseconds: total and load (waiting in line
        and loading) by the clock, the prompt's and the answer's from the engine's report."""
        prompt_ns = int(stats.ttft_ms * 1e6)
        if stats.tokens_per_s > 0:
            eval_ns = int(stats.tokens / stats.tokens_per_s * 1e9)
        else:
            eval_ns = max(0, int((stats.total_ms - stats.ttft_ms) * 1e6))
        return {"total_duration": self.elapsed(), "load_duration": self.ready - self.begun,
                "prompt_eval_count": stats.prompt_tokens, "prompt_eval_duration": prompt_ns,
                "eval_count": stats.tokens, "eval_duration": eval_ns}


def done_reason(stats: AnswerStats) -> str:
    """"length" at num_predict or the context's end, else "stop" (a tool call too, as Ollama says)."""
    return "length" if cut_short(stats) else "stop"


def tool_call_entry(call: ToolCall) -> dict[str, Any]:
    """A call as Ollama writes it: arguments as an object (text that is no JSON object stays text)."""
    try:
        arguments: Any = json.loads(call.arguments or "{}")
    except ValueError:
        arguments = call.arguments
    return {"id": call.id, "function": {"index": call.index, "name": call.name, "arguments": arguments}}


def _size_label(model: ApiModel) -> str:
    facts = model.facts
    if facts is None:
        return ""
    if facts.parameters:  # Ollama's own form: "494.03M", "8.0B"
        count = facts.parameters
        return f"{count / 1e9:.1f}B" if count >= 1e9 else f"{count / 1e6:.2f}M"
    return facts.size_label or ""


def details(model: ApiModel) -> dict[str, Any]:
    """ModelDetails: format, family and families, parameter_size, quantization_level ("" where unknown)."""
    facts = model.facts
    family = (facts.architecture if facts is not None else None) or ""
    return {"parent_model": "", "format": model.format, "family": family, "families": [family] if family else [],
            "parameter_size": _size_label(model),
            "quantization_level": (facts.quantization if facts is not None else None) or ""}


def tag_entry(model: ApiModel) -> dict[str, Any]:
    """One model of /api/tags: Kestrel's id as name and model; digest: its file's SHA-256 where known."""
    return {"name": model.id, "model": model.id, "modified_at": _stamp(model.created), "size": model.size,
            "digest": model.sha256 or "", "details": details(model)}


def running_entry(model: ApiModel) -> dict[str, Any]:
    """One model of /api/ps. size_vram is 0 and expires_at left out: Kestrel does not report the memory
    per device here, and unloads after its own idle time, not at a time a request set."""
    return {"name": model.id, "model": model.id, "size": model.size, "digest": model.sha256 or "",
            "details": details(model), "size_vram": 0}


def capabilities(model: ApiModel) -> list[str]:
    facts = model.facts
    found = ["completion"]
    for word in facts.capabilities if facts is not None else ("vision",) if model.vision else ():
        mapped = _CAPABILITIES.get(word)
        if mapped is not None and mapped not in found:
            found.append(mapped)
    return found


def _parameters(model: ApiModel) -> str:
    """The sampling it answers with, in a Modelfile's PARAMETER words."""
    names = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
             "repeat_penalty": "repeat_penalty", "max_tokens": "num_predict", "seed": "seed"}
    return "\n".join(f"{names[key]:<15} {value}" for key, value in model.sampling.items() if key in names)


def show(model: ApiModel) -> dict[str, Any]:
    """/api/show: a Modelfile written from what Kestrel knows (FROM names the model, not a path on this PC)."""
    facts = model.facts
    template = (facts.template if facts is not None else None) or ""
    parameters = _parameters(model)
    modelfile = [f"# Modelfile written by Kestrel for {model.name}", f"FROM {model.id}"]
    if template:
        modelfile.append(f'TEMPLATE """{template}"""')
    modelfile += [f"PARAMETER {entry}" for entry in parameters.splitlines()]
    info: dict[str, Any] = {}
    if facts is not None and facts.architecture:
        info = {"general.architecture": facts.architecture, "general.parameter_count": facts.parameters or 0,
                **facts.numbers}
    return {"license": (facts.license if facts is not None else None) or "", "modelfile": "\n".join(modelfile) + "\n",
            "parameters": parameters, "template": template, "details": details(model), "model_info": info,
            "capabilities": capabilities(model), "modified_at": _stamp(model.created)}
