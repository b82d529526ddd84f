"""What the scripted engine answers: scripts, and loads and prompts worked out as the engine does.

A load reads the model's header, asks placement where it runs on a recorded machine and
clamps the context, with the engine's own functions, so its Loaded (device, context,
reasons, template) is the real engine's. A prompt is the model's chat template rendered
and cut to fit as the engine cuts it; only the tokens are words, not the model's.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.answer_stats import AnswerStats, FinishReason
from app.engine import protocol as p
from app.engine.answers.answer_common import AnswerTiming, fit_prompt
from app.engine.answers.answer_shape import new_call_id, shape_answer
from app.engine.tool_calls.tool_calls import family_of
from app.engine.templates.chat_format import ModelTokens, PromptSpec, build_prompt, template_in_use
from app.engine.errors import ContextOverflow, ShapeRefused
from app.engine.failure_words import WINDOW, describe
from app.engine.failures import (BadModelFile, DeviceRefused, FailedOn, Failure, LoadFailure, NoDeviceWorked,
                                 NoGpuBuild, ProviderMissing)
from app.engine.backends.loading import device_text, with_gpu_layers
from app.engine.backends.resources import default_threads, memory_problem
from app.engine.backends.llama.state_store import common_prefix
from app.engine.answers.thinking import has_switch, template_variables, thinking_in
from app.hardware.fit import FitFacts
from app.hardware.placement import ALL_LAYERS, Placement, PlacementRefused, place
from app.hardware.report import HardwareReport
from app.library.fit_facts import facts_for
from app.library.model_files.gguf_info import ModelFileError, read_gguf_info
from app.library.model_files.model_format import detect_format, read_onnx_folder
from app.service.models.engine_errors import EngineError

# The answer when a test scripts none: endless, so max_tokens ends it ("length"), as
# the tiny random model's answers end.
WORDS = ("Kestrels", " hover", " into", " the", " wind", ",", " watching", " the", " grass", " below", ".")


@dataclass(frozen=True)
class Script:
    """How one answer goes.

    thinking pieces stream first (Delta.thinking; left out when the chat turned thinking
    off and the model's template can), then text pieces; each piece is one token.
    endless: the text repeats until the token budget ends it (finish length, or context
    when the context is what was short); otherwise it ends with finish stop.
    token_s: seconds per token (None: the engine's). die_after / hang_after: the engine
    dies (exit_code) or stops responding after that many tokens. refuse: the failure
    raised (as EngineError) instead of answering. stats: AnswerStats fields that replace
    what was measured. calls: (name, arguments JSON) of the tool calls the answer makes,
    each a Delta(tool_call=...) after the text, when the request gave tools (shape.tools,
    tool_choice not "none") and the text was not cut short.
    """

    text: tuple[str, ...] = WORDS
    thinking: tuple[str, ...] = ()
    endless: bool = True
    token_s: float | None = None
    die_after: int | None = None
    hang_after: int | None = None
    exit_code: int = -9
    refuse: Failure | None = None
    stats: Mapping[str, Any] = field(default_factory=dict)
    calls: tuple[tuple[str, str], ...] = ()


@dataclass
class ScriptedModel:
    """A model "loaded" in the scripted engine: what it says of itself, and its KV cache."""

    loaded: p.Loaded
    template: str | None
    cached: list[int] = field(default_factory=list)


def load_model(request: p.Load, report: HardwareReport, *, gpu_offload: bool = False) -> ScriptedModel:
    """Load as app/engine/backends/loading.py does: placements in order, each failure kept as a reason.

    Raises EngineError with the engine's facts: BadModelFile for a file that is not a
    model, DeviceRefused, a load failure, NoDeviceWorked. GPU placements fail as on a
    llama.cpp built without GPU support unless gpu_offload; ONNX ones run on the CPU only.
    """
    started = time.perf_counter()
    try:
        facts = facts_for(Path(request.model_path), request.context_length)
        architecture, file_template = _header(Path(request.model_path))
    except ModelFileError as exc:
        raise EngineError(BadModelFile(exc.kind, exc.message)) from exc
    try:
        placements = place(report, facts, request.device)
    except PlacementRefused as exc:
        raise EngineError(DeviceRefused(exc.preference, exc.reason)) from exc
    if request.gpu_layers is not None and facts.format == "gguf":
        placements = with_gpu_layers(placements, request.gpu_layers)
    failures: list[str] = []
    attempts: list[FailedOn] = []
    for placement in placements:
        problem = _cannot_run(placement, Path(request.model_path).name, facts, gpu_offload)
        if problem is None:
            template, chat_format = template_in_use(file_template, request.chat_template)
            loaded = p.Loaded(
                request_id=request.request_id, model_path=request.model_path,
                load_ms=(time.perf_counter() - started) * 1000, device=device_text(placement),
                context_length=facts.context_length, threads=request.threads or default_threads(),
                architecture=architecture, chat_format=chat_format, placement_reason=placement.reason,
                fallback_reasons=tuple(failures), thinks=thinking_in(template) is not None,
                thinking_switch=has_switch(template), calls_tools=family_of(template) is not None)
            return ScriptedModel(loaded, template)
        failures.append(f"{placement.device_name}: {describe(problem, WINDOW)}")
        attempts.append(FailedOn(placement.device_name, problem))
    # The last failure (normally the CPU's) is the one the user can act on.
    raise EngineError(attempts[0].failure if len(attempts) == 1 else NoDeviceWorked(tuple(attempts)))


def _header(path: Path) -> tuple[str, str | None]:
    """The model's architecture and chat template, from its header or its folder."""
    if detect_format(path) == "gguf":
        info = read_gguf_info(path)
        return info.architecture, info.chat_template
    folder = read_onnx_folder(path)
    return folder.model_type, folder.chat_template


def _cannot_run(placement: Placement, name: str, facts: FitFacts, gpu_offload: bool) -> LoadFailure | None:
    """Why this placement fails here, as the engine's backends find it (None: it loads)."""
    if placement.backend == "llama.cpp" and placement.gpu_layers != 0 and not gpu_offload:
        return NoGpuBuild()
    if placement.backend == "onnxruntime" and placement.kind != "cpu":
        return ProviderMissing(str(placement.provider), "the scripted engine runs ONNX models on the CPU only")
    return memory_problem(name, facts) if placement.gpu_layers != ALL_LAYERS else None


@dataclass
class AnswerPlan:
    """One answer worked out before it streams: its pieces, and how it ends if they run out."""

    pieces: list[tuple[str, bool]]
    finish: FinishReason
    prompt: list[int]
    spec: PromptSpec
    left_out: int
    timing: AnswerTiming
    threads: int
    calls: tuple[p.ToolCall, ...] = ()


def plan_answer(model: ScriptedModel, request: p.Generate, script: Script) -> AnswerPlan:
    """Fit the prompt as the engine does (EngineError PromptTooLong when it cannot; a
    raw prompt as it is), check the shape as the engine does (EngineError with its
    ShapeRefused failure), then lay out the script's pieces within the token budget."""
    if script.refuse is not None:
        raise EngineError(script.refuse)
    timing = AnswerTiming()
    settings, n_ctx, shape = request.settings, model.loaded.context_length, request.shape
    variables = template_variables(settings.thinking)
    try:
        shaped = shape_answer(shape, model.template, Path(model.loaded.model_path).name)
    except ShapeRefused as exc:
        raise EngineError(exc.failure) from exc

    def spec_for(messages: Any) -> PromptSpec:
        return build_prompt(messages, template=model.template, architecture=model.loaded.architecture,
                            tokens=ModelTokens(), variables=variables, tools=shaped.tools)

    try:
        if shape.prompt is None:
            spec, prompt, left_out = fit_prompt(request, n_ctx, spec_for, tokenize)
        else:
            spec, prompt, left_out = PromptSpec(shape.prompt, "raw", ()), tokenize(shape.prompt), 0
            if len(prompt) >= n_ctx:
                raise ContextOverflow(len(prompt), n_ctx)
    except ContextOverflow as exc:
        raise EngineError(exc.failure) from exc
    budget = min(settings.max_tokens, n_ctx - len(prompt))
    thinking = shape.prompt is None and (settings.thinking or not model.loaded.thinking_switch)
    thinks = script.thinking if thinking else ()
    pieces = [(text, True) for text in thinks] + [(text, False) for text in _text(script, budget)]
    finish = FinishReason.STOP
    if len(pieces) >= budget:
        pieces = pieces[:budget]
        finish = FinishReason.LENGTH if budget == settings.max_tokens else FinishReason.CONTEXT
    calls = tuple(p.ToolCall(index, new_call_id(), name, arguments) for index, (name, arguments)
                  in enumerate(script.calls)) if shape.uses_tools and finish == FinishReason.STOP else ()
    timing.evaluated = len(prompt) - common_prefix(model.cached, prompt)
    return AnswerPlan(pieces, finish, prompt, spec, left_out, timing, request.threads or model.loaded.threads,
                      calls)


def _text(script: Script, budget: int) -> Iterator[str]:
    count = 0
    while count < budget:
        for text in script.text:
            yield text
            count += 1
        if not script.endless or not script.text:
            return


def answer_stats(model: ScriptedModel, plan: AnswerPlan, finish: FinishReason, script: Script) -> AnswerStats:
    """The Done stats, measured as the engine measures them, then the script's replacements."""
    stats = plan.timing.stats(prompt_tokens=len(plan.prompt), device=model.loaded.device, finish=finish,
                              chat_format=plan.spec.chat_format, left_out=plan.left_out,
                              template_note=plan.spec.note or "", threads=plan.threads)
    return dataclasses.replace(stats, **script.stats)


def count_prompt(model: ScriptedModel, messages: Sequence[p.ChatMessage], thinking: bool) -> int:
    """The prompt's tokens as plan_answer counts them, no turn left out (EngineClient.count_prompt)."""
    spec = build_prompt(messages, template=model.template, architecture=model.loaded.architecture,
                        tokens=ModelTokens(), variables=template_variables(thinking))
    return len(tokenize(spec.text))


def tokenize(text: str) -> list[int]:
    """Words (with their leading space) as tokens: a prompt's length in the same range as a
    small model's tokenizer gives, and the same ids for the same words every time."""
    return [_VOCABULARY.setdefault(word, len(_VOCABULARY)) for word in re.findall(r"\s*\S+|\s+", text)]


_VOCABULARY: dict[str, int] = {}


def scripted_text(tokens: int, script: Script = Script()) -> str:
    """What an endless script writes in that many tokens (its thinking left out)."""
    pieces = list(_text(script, tokens))[:tokens]
    return "".join(pieces)


def written(answer: str, thinking: str = "") -> Script:
    """A script that thinks then answers these texts once, a word a token, and stops."""
    return Script(text=tuple(re.findall(r"\s*\S+", answer)), thinking=tuple(re.findall(r"\s*\S+", thinking)),
                  endless=False)
