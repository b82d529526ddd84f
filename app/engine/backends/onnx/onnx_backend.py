"""ONNX models through ONNX Runtime GenAI: load a model folder, stream an answer."""

from __future__ import annotations

import dataclasses
import json
import platform
import random
import time
from typing import Callable, Generator, Iterator, Mapping, Sequence

import onnxruntime_genai as og

from app.core.answer_stats import FinishReason
from app.engine.answers.answer_common import AnswerTiming, answer, stream_tokens
from app.engine.answers.answer_shape import PLAIN, ShapedAnswer, shape_answer
from app.engine.tool_calls.tool_calls import family_of
from app.engine.answers.answer_text import AnswerText
from app.engine.backends.backend import DeviceChoice
from app.engine.templates.chat_format import ModelTokens, PromptSpec, build_prompt, template_in_use
from app.engine.control import GenerationControl
from app.engine.errors import ContextOverflow, ImageRefused, ModelLoadError, ShapeRefused
from app.engine.failures import BadShape, NoVision, OnnxRefused, OnnxTrouble, ProviderMissing, ShapePart
from app.engine.backends.onnx.onnx_prompt import OnnxPromptTokens, special_texts
from app.engine.templates.outside_text import PromptPrep, spans_of
from app.engine.protocol import ChatMessage, Delta, Done, Generate, Load, Loaded
from app.engine.backends.resources import default_threads, memory_problem
from app.engine.answers.thinking import has_switch, template_variables, thinking_in
from app.hardware.onnx_source import quiet_windows_telemetry
from app.library.fit_facts import onnx_fit_facts
from app.library.model_files.onnx_graph import kv_element_bytes
from app.library.model_files.model_format import ModelFolderError, OnnxFolderInfo, damaged_json_file, read_onnx_folder

quiet_windows_telemetry(og, platform.system())

# Kestrel's name for an execution provider -> (ONNX Runtime GenAI's name, its name in messages).
PROVIDERS: Mapping[str, tuple[str, str]] = {
    "cpu": ("cpu", "CPU"),
    "cuda": ("cuda", "NVIDIA GPU (CUDA)"),
    "dml": ("dml", "GPU (DirectML)"),
    "qnn": ("qnn", "NPU (QNN)"),
    "openvino": ("openvino", "OpenVINO"),
    "webgpu": ("webgpu", "GPU (WebGPU)"),
    "nvtensorrtrtx": ("NvTensorRtRtx", "NVIDIA GPU (TensorRT RTX)"),
}


class OnnxBackend:
    """One loaded ONNX Runtime GenAI model and its tokenizer.

    Every answer starts from a fresh generator, so nothing is cached between turns: the
    whole prompt is evaluated each time, and Done.stats says so.
    """

    def __init__(self, model: og.Model, tokenizer: og.Tokenizer, info: OnnxFolderInfo,
                 loaded: Loaded) -> None:
        self._model = model
        self._tokenizer = tokenizer
        self._info = info
        self.loaded = loaded
        self._tokens = ModelTokens(bos=info.bos_token, eos=info.eos_token,
                                   end_of_generation=_end_of_generation_texts(tokenizer))
        self._eos = frozenset(int(t) for t in tokenizer.eos_token_ids)
        self._prompt_tokens = OnnxPromptTokens(tokenizer, special_texts(info.path, info.bos_token, info.eos_token),
                                               bos_text=info.bos_token)

    @classmethod
    def load(cls, request: Load, choice: DeviceChoice, *, execution_provider: str = "cpu",
             provider_options: Mapping[str, str] | None = None) -> "OnnxBackend":
        """Check the folder, then load it on the provider asked for; errors say what to do.

        choice is where loading decided it runs, as Loaded and each answer report it.
        execution_provider is a key of PROVIDERS; an unknown one is a bug and raises
        ValueError. A provider this ONNX Runtime GenAI build lacks raises ModelLoadError.
        """
        if execution_provider not in PROVIDERS:
            raise ValueError(f"unknown execution provider {execution_provider!r}")
        started = time.perf_counter()
        info = read_onnx_folder(request.model_path)
        template, chat_format = template_in_use(info.chat_template, request.chat_template)
        info = dataclasses.replace(info, chat_template=template)
        facts = onnx_fit_facts(info, request.context_length, kv_element_bytes(info))
        context = facts.context_length
        threads = request.threads or default_threads()
        # On a GPU or NPU, placement already checked that device's memory.
        problem = memory_problem(info.path.name, facts) if execution_provider == "cpu" else None
        if problem:
            raise ModelLoadError(problem)
        try:
            config = _config(info, execution_provider, provider_options or {}, context, threads)
            model = og.Model(config)
            tokenizer = og.Tokenizer(model)
        except (RuntimeError, UnicodeError) as exc:
            # A damaged tokenizer.json comes out as a bare UnicodeDecodeError (GenAI's
            # message quotes the bad bytes) or a JSON parser's complaint naming no file.
            damaged = damaged_json_file(info.path)
            if damaged is not None:
                raise damaged from exc
            if isinstance(exc, UnicodeError):
                raise ModelFolderError("bad_tokenizer", info.path, (
                    f'The model folder "{info.path.name}" is damaged: ONNX Runtime GenAI found '
                    "bytes that are not UTF-8 text in one of its files. Download the model again."
                )) from exc
            raise ModelLoadError(_refused(info, execution_provider, exc)) from exc
        loaded = Loaded(
            request_id=request.request_id,
            model_path=request.model_path,
            load_ms=(time.perf_counter() - started) * 1000,
            device=choice.device,
            context_length=context,
            threads=threads,
            architecture=info.model_type,
            chat_format=chat_format,
            placement_reason=choice.reason,
            fallback_reasons=choice.fallback_reasons,
            thinks=thinking_in(info.chat_template) is not None,
            thinking_switch=has_switch(info.chat_template),
            vision_problem=NO_IMAGES if request.projector_path else "",
            calls_tools=family_of(info.chat_template) is not None,
        )
        return cls(model, tokenizer, info, loaded)

    def reset(self) -> None:
        """Forget the cached conversation: there is none, each answer starts afresh."""

    def close(self) -> None:
        # Dropping the last references frees the session and its weights.
        self._tokenizer = None
        self._model = None

    def forget_states(self) -> None:
        """Nothing to forget: ONNX Runtime GenAI cannot hand out or take back a generator's
        KV cache (docs/design.md, "Saved chat states")."""

    def generate(self, request: Generate, control: GenerationControl) -> Iterator[Delta | Done]:
        """Stream the answer; cancel and pause take effect between two tokens.

        Its shape is checked first (ShapeRefused). ONNX Runtime GenAI holds an answer to
        a JSON schema (its guidance, llguidance inside) but reads no GBNF, so this backend is
        registered without grammars and the engine refuses one before it gets here; a JSON
        schema, one JSON object, or a forced tool call (whose schema
        app/engine/answers/answer_shape.py writes) is followed. Calls the model opens on its
        own (tool_choice "auto") are not held to the tools' schemas as the GGUF backend holds
        them (app/engine/backends/llama/lazy_grammar.py): 0.18 takes guidance on GeneratorParams, once per
        generator, and a new generator evaluates the whole prompt again; a call that does
        not parse still comes back as text with a note.
        """
        self._no_images(request.messages)
        shaped = shape_answer(request.shape, self._info.chat_template, self._info.path.name)
        schema = shaped.call_schema or request.shape.json_schema or (ANY_OBJECT if request.shape.json_object else None)
        variables = template_variables(request.settings.thinking)
        prep = self._prep(lambda: control.cancelled)
        return answer(request, self.loaded, spec_for=lambda messages: self._spec(messages, variables, shaped, prep),
                      tokenize=lambda text: self._prompt_tokens.prompt(text, prep.plain(text)),
                      thinking=thinking_in(self._info.chat_template), threads=self.loaded.threads, shaped=shaped,
                      cancelled=prep.cancelled, stream=lambda prompt, budget, text, timing: self._stream(
                          request, prompt, budget, text, control, timing, schema))

    def count_tokens(self, text: str) -> int:
        """Tokens of text from outside inside a prompt (its control-token text as text, as
        the prompt reads it): the tokenizer's own BOS, which some put in front of
        everything they encode, is not counted (generate's prompt has one BOS)."""
        return self._prompt_tokens.count(text)

    def count_prompt(self, messages: Sequence[ChatMessage], thinking: bool) -> int:
        """Tokens of the prompt generate would make of these messages (before any trim)."""
        self._no_images(messages)
        prep = self._prep()
        spec = self._spec(messages, template_variables(thinking), prep=prep)
        return len(self._prompt_tokens.prompt(spec.text, spec.plain))

    def _prep(self, cancelled: Callable[[], bool] | None = None) -> PromptPrep:
        return PromptPrep(lambda text: spans_of(self._prompt_tokens.control, text), self._info.chat_template,
                          cancelled)

    def _no_images(self, messages: Sequence[ChatMessage]) -> None:
        if any(message.images for message in messages):
            raise ImageRefused(NoVision(self._info.path.name, NO_IMAGES))

    def _spec(self, messages: Sequence[ChatMessage], variables: dict[str, bool] | None = None,
              shaped: ShapedAnswer = PLAIN, prep: PromptPrep | None = None) -> PromptSpec:
        prep = prep or self._prep()
        spec = build_prompt(messages, template=self._info.chat_template, architecture=self._info.model_type,
                            tokens=self._tokens, variables=variables, tools=shaped.tools, shield=prep.shield,
                            cancelled=prep.cancelled)
        prep.keep(spec.text, spec.plain)
        return spec

    def _tokenize(self, text: str) -> list[int]:
        """A whole prompt's ids (the template's text, none from outside)."""
        return self._prompt_tokens.prompt(text)

    def _stream(self, request: Generate, prompt: list[int], budget: int, text: AnswerText,
                control: GenerationControl, timing: AnswerTiming,
                schema: str | None = None) -> Generator[Delta, None, FinishReason]:
        finish = FinishReason.LENGTH if budget == request.settings.max_tokens else FinishReason.CONTEXT
        if budget <= 0:
            return finish
        tokens = self._tokens_for(request, prompt, budget, schema)
        def first_token() -> None:
            # Nothing is reused between turns: the whole prompt was evaluated.
            timing.evaluated = len(prompt)

        try:
            return (yield from stream_tokens(
                request.request_id, tokens, is_end=self._eos.__contains__, piece=self.token_text(),
                answer=text, budget=budget, finish=finish, control=control, timing=timing,
                on_first=first_token))
        finally:
            tokens.close()  # frees the native generator now, not whenever it is collected

    def _tokens_for(self, request: Generate, prompt: list[int], budget: int,
                    schema: str | None = None) -> Generator[int, None, None]:
        """The tokens of one answer, one at a time, as the model makes them; held to the
        JSON schema when there is one (ShapeRefused when GenAI cannot follow it)."""
        params = self._params(request, len(prompt) + budget)
        try:
            if schema is not None:
                params.set_guidance("json_schema", _compact(schema))
            generator = og.Generator(self._model, params)
        except RuntimeError as exc:
            if schema is None:
                raise
            raise ShapeRefused(BadShape(ShapePart.JSON_SCHEMA, f"ONNX Runtime GenAI cannot follow it ({exc})")) from None
        try:
            generator.append_tokens(prompt)
            while not generator.is_done():
                generator.generate_next_token()
                yield int(generator.get_next_tokens()[0])
        finally:
            del generator

    def token_text(self) -> Callable[[int], bytes]:
        """A decoder for one answer: the UTF-8 bytes each new token completes.

        A character split across tokens (an emoji is often three) comes out whole with
        the token that completes it, and nothing with the ones before.
        """
        stream = self._tokenizer.create_stream()
        return lambda token: stream.decode(token).encode("utf-8")

    def _params(self, request: Generate, max_length: int) -> og.GeneratorParams:
        params = og.GeneratorParams(self._model)
        settings = request.settings
        seed = settings.seed if settings.seed >= 0 else random.getrandbits(31)
        options: dict[str, float | int | bool] = {
            "max_length": max_length,
            "repetition_penalty": settings.repeat_penalty,
            "random_seed": seed,
        }
        if settings.temperature > 0:
            options.update(
                do_sample=True,
                temperature=settings.temperature,
                top_p=settings.top_p if 0 < settings.top_p <= 1 else 1.0,
                top_k=_top_k(settings.top_k, self._info.vocab_size),
            )
        else:
            options.update(do_sample=False)
        params.set_search_options(**options)
        return params


_plugin_providers: set[str] = set()


def register_plugin_providers(libraries: Sequence[tuple[str, str]]) -> None:
    """Give ONNX Runtime GenAI the provider libraries Windows ML made ready, once each.

    GenAI keeps a registry of its own, apart from the onnxruntime module's, so the
    probe's registration does not reach it. Raises ModelLoadError naming the provider.
    """
    for name, path in libraries:
        if name in _plugin_providers:
            continue
        try:
            og.register_execution_provider_library(name, path)
        except Exception as exc:  # The driver's library refused: that device is out.
            raise ModelLoadError(ProviderMissing(name, str(exc))) from exc
        _plugin_providers.add(name)


def _config(info: OnnxFolderInfo, provider: str, options: Mapping[str, str],
            context: int, threads: int) -> og.Config:
    config = og.Config(str(info.path))
    # The folder's genai_config.json names the provider it was exported for; the
    # placement decides instead, and an empty list means the CPU.
    config.clear_providers()
    name = PROVIDERS[provider][0]
    if provider != "cpu":
        config.append_provider(name)
    for key, value in options.items():
        config.set_provider_option(name, key, value)
    config.overlay(json.dumps({
        "model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}},
        "search": {"max_length": context},
    }))
    return config


def _refused(info: OnnxFolderInfo, provider: str, exc: Exception) -> OnnxRefused:
    """Why ONNX Runtime GenAI refused, as far as its message tells."""
    reason = str(exc).strip()
    lowered = reason.lower()
    if "external data" in lowered or ("external" in lowered and "initializer" in lowered):
        trouble = OnnxTrouble.MISSING_WEIGHTS
    elif provider != "cpu":
        # A damaged model fails on the CPU too, which the placement tries next.
        trouble = OnnxTrouble.DEVICE
    else:
        trouble = OnnxTrouble.MODEL
    return OnnxRefused(info.path.name, info.model_type, PROVIDERS[provider][1], reason, trouble,
                       info.decoder_file.name)


def _compact(schema: str) -> str:
    """The schema with llguidance told to allow no whitespace between JSON tokens (unless
    it says otherwise): its default allows any amount, and a weak model then writes
    spaces until the token limit cuts the JSON short. llama.cpp's schema grammars bound it."""
    try:
        value = json.loads(schema)
    except ValueError:
        return schema  # GenAI says what is wrong with it
    if isinstance(value, dict) and "x-guidance" not in value:
        value["x-guidance"] = {"whitespace_flexible": False}
        return json.dumps(value)
    return schema


def _top_k(top_k: int, vocab_size: int | None) -> int:
    # 0 means no limit to both engines; ONNX Runtime GenAI refuses one past the vocabulary.
    top_k = max(0, top_k)
    return min(top_k, vocab_size) if vocab_size else top_k


def _end_of_generation_texts(tokenizer: og.Tokenizer) -> tuple[str, ...]:
    """The texts of the tokens that end the model's turn: genai_config.json's eos_token_id
    list, decoded. The tokenizer leaves special tokens out of what it decodes unless asked;
    the answer's own decoding (a stream made per answer) keeps leaving them out."""
    try:
        tokenizer.update_options(skip_special_tokens="false")
    except RuntimeError:  # A tokenizer without the option: the stop strings do without these.
        return ()
    try:
        texts = [tokenizer.decode([int(token)]) for token in tokenizer.eos_token_ids]
    finally:
        tokenizer.update_options(skip_special_tokens="true")
    return tuple(dict.fromkeys(text for text in texts if text))


__all__ = ["OnnxBackend", "ModelFolderError", "ModelLoadError", "ContextOverflow", "PROVIDERS"]


# response_format json_object: one JSON object, any keys.
ANY_OBJECT = '{"type": "object"}'
# Loaded.vision_problem of an ONNX model given a projector, and NoVision's reason.
NO_IMAGES = "ONNX models take no images in Kestrel yet; this one answers text only."
