"""GGUF models through llama-cpp-python: load, stream an answer, reuse the KV cache."""

from __future__ import annotations

import dataclasses
import ctypes
import random
import time
from pathlib import Path
from typing import Any, Callable, Generator, Iterator, Sequence

import llama_cpp

from app.core.answer_stats import FinishReason
from app.core.paths import data_paths
from app.core.settings import PromptLookupMode
from app.engine.backends.llama import cache_files, kv_state, native_log
from app.engine.answers.answer_common import AnswerTiming, answer, stream_tokens
from app.engine.answers.answer_shape import PLAIN, ShapedAnswer, shape_answer
from app.engine.tool_calls.tool_calls import family_of
from app.engine.answers.answer_text import AnswerText
from app.engine.backends.backend import DeviceChoice
from app.engine.templates.chat_format import PromptSpec, build_prompt, template_in_use
from app.engine.control import GenerationControl
from app.engine.errors import ModelLoadError, ShapeRefused
from app.engine.failures import BadShape, GgufRefused
from app.engine.backends.llama.gguf_tokens import model_tokens
from app.engine.backends.llama.grammar import answer_grammar
from app.engine.backends.llama.image_prompt import ImagePrompt, evaluate, images_for, with_markers
from app.engine.backends.llama.lazy_grammar import LazyCallGrammar, lazy_grammar_for
from app.engine.templates.outside_text import PromptPrep
from app.engine.backends.llama.prompt_tokens import GgufPromptTokens
from app.engine.backends.llama.prompt_lookup import LookupStats, lookup_tokens
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, Generate, Load, Loaded
from app.engine.backends.resources import default_threads, memory_problem
from app.engine.backends.llama.state_store import StateStore, common_prefix
from app.engine.answers.thinking import has_switch, template_variables, thinking_in
from app.engine.backends.llama.vision import Projector, load_projector
from app.hardware.placement_types import ALL_LAYERS
from app.library.fit_facts import gguf_fit_facts
from app.library.model_files.gguf_info import GgufInfo, ModelFileError, read_gguf_info
from app.library.model_files.model_purpose import gguf_purpose, not_for_chat


class _CountingLlama(llama_cpp.Llama):
    """A Llama that counts the tokens it evaluates, to show what the KV cache saved.

    It also hides the chat templates from llama-cpp-python's own chat handlers: those
    compile every template in the file when the model loads (outside any limit), so a
    template with a syntax error failed the load. Kestrel renders the template itself
    (app/engine/templates/chat_format.py), where a bad one falls back with a reason.
    """

    evaluated = 0
    _metadata: dict[str, str] = {}

    @property
    def metadata(self) -> dict[str, str]:
        return self._metadata

    @metadata.setter
    def metadata(self, value: dict[str, str]) -> None:
        self._metadata = {key: text for key, text in value.items() if not key.startswith("tokenizer.chat_template")}

    def eval(self, tokens: Sequence[int]) -> None:  # Override Llama.eval.
        self.evaluated += len(tokens)
        super().eval(tokens)


class GgufBackend:
    """One loaded GGUF model and its context."""

    def __init__(self, llm: _CountingLlama, info: GgufInfo, loaded: Loaded,
                 states: StateStore | None = None, projector: Projector | None = None) -> None:
        self._llm = llm
        self._projector = projector
        self._states = states
        # How the last answer began and drafted: "", "ram" or "disk"; for benchmarks and tests.
        self.restored_from = ""
        self.lookup = LookupStats()
        self.held_calls = 0
        self._info = info
        self.loaded = loaded
        model = llm._model
        self._vocab = model.vocab
        self._tokens = model_tokens(llm, info)
        self._threads = loaded.threads
        self._piece_buffer = ctypes.create_string_buffer(256)
        self._prompt_tokens = GgufPromptTokens.reading(model, self._tokens.bos)

    @classmethod
    def load(cls, request: Load, choice: DeviceChoice, *, gpu_layers: int = 0) -> "GgufBackend":
        """Check the file, then load it with gpu_layers on the GPU; errors say what the user can do.

        choice is where loading decided it runs, as Loaded and each answer report it.
        """
        started = time.perf_counter()
        info = read_gguf_info(Path(request.model_path))
        # Checked here, below every front end: the window, `kestrel chat` and the API all load
        # through this, and an embedding model loaded for chat only answers nonsense.
        refusal = not_for_chat(info.name or info.path.name, gguf_purpose(info))
        if refusal:
            raise ModelFileError("not_for_chat", info.path, refusal)
        template, chat_format = template_in_use(info.chat_template, request.chat_template)
        info = dataclasses.replace(info, chat_template=template)
        facts = gguf_fit_facts(info, request.context_length)
        # A model wholly on the GPU needs that GPU's memory, which placement checked.
        problem = memory_problem(info.path.name, facts) if gpu_layers != ALL_LAYERS else None
        if problem:
            raise ModelLoadError(problem)
        threads = request.threads or default_threads()
        native_log.capture()
        native_log.clear()
        try:
            llm = _CountingLlama(
                model_path=request.model_path,
                n_ctx=facts.context_length,
                n_threads=threads,
                n_threads_batch=threads,
                n_gpu_layers=gpu_layers,
                # The full-size sliding-window cache lets a later turn reuse the
                # earlier turns (Gemma 3 uses sliding-window attention).
                swa_full=True,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(_refused(info, exc)) from exc
        # On the GPU only when the text model is (app/engine/backends/llama/vision.py checks the file first).
        projector, vision_problem = load_projector(
            request.projector_path, llm, info.embedding_length or llm.n_embd(), use_gpu=gpu_layers != 0,
            threads=threads) if request.projector_path else (None, "")
        loaded = Loaded(
            request_id=request.request_id,
            model_path=request.model_path,
            load_ms=(time.perf_counter() - started) * 1000,
            device=choice.device,
            context_length=llm.n_ctx(),
            threads=threads,
            architecture=info.architecture,
            chat_format=chat_format,
            placement_reason=choice.reason,
            fallback_reasons=choice.fallback_reasons,
            thinks=thinking_in(info.chat_template) is not None,
            thinking_switch=has_switch(info.chat_template),
            vision=projector is not None,
            vision_problem=vision_problem,
            calls_tools=family_of(info.chat_template) is not None,
        )
        return cls(llm, info, loaded, _state_store(request, info, llm.n_ctx()), projector)

    def reset(self) -> None:
        """Forget the cached conversation."""
        self._llm.reset()
        self._llm.n_tokens = 0

    def close(self) -> None:
        self._prompt_tokens.close()
        if self._states is not None:
            self._states.close()
        if self._projector is not None:
            self._projector.close()  # before the text model it was made against
        self._llm.close()

    def forget_states(self) -> None:
        """Drop the saved conversation states (RAM and files); the open chat's cache stays."""
        if self._states is not None:
            self._states.forget()

    def generate(self, request: Generate, control: GenerationControl) -> Iterator[Delta | Done]:
        """Stream the answer; cancel and pause take effect between two tokens.

        Its shape (Generate.shape, app/engine/answers/answer_shape.py) is checked before anything
        is evaluated; ShapeRefused says what cannot be done. A grammar is llama.cpp's:
        the grammar sampler sits in the sampler chain before the choice of each token, so
        every token the model writes keeps the answer inside it, and the model's end
        tokens are allowed only once the grammar is complete. With tools and tool_choice
        "auto", each call the model opens is held to the tools' schemas until it closes
        (app/engine/backends/llama/lazy_grammar.py).
        """
        shaped = shape_answer(request.shape, self._info.chat_template, self._info.path.name)
        grammar = self._grammar(request.shape, shaped)
        lazy = lazy_grammar_for(shaped, self._readable) if grammar is None else None
        variables = template_variables(request.settings.thinking)
        threads = self._use_threads(request.threads or self.loaded.threads)
        prep = self._prep(lambda: control.cancelled)
        images = self._images(request.messages, prep) if request.shape.prompt is None else None
        try:
            yield from answer(request, self.loaded, spec_for=lambda messages: self._spec(messages, variables, shaped,
                                                                                         images, prep),
                              tokenize=images.tokenize if images else lambda text: self._prompt(text, prep),
                              thinking=thinking_in(self._info.chat_template), threads=threads,
                              shaped=shaped, lazy=lazy, cancelled=prep.cancelled,
                              stream=lambda prompt, budget, text, timing: self._stream(
                                  request, prompt, budget, text, control, timing, grammar, lazy, images))
        finally:
            if images is not None:
                images.close()
        # Calls held to the tools' schemas in the last answer; for benchmarks and tests.
        self.held_calls = lazy.switches if lazy is not None else 0
        # Done is sent by now: saving the state never delays the answer.
        if request.keep_state:
            self._save_state()

    def count_tokens(self, text: str) -> int:
        """Tokens of text from outside inside a prompt (no BOS; a control token's text read
        as text, as the prompt's tokenizing reads outside text). Safe beside generate:
        app/engine/counting.py says why."""
        return len(self._prompt_tokens.plain_text(text))

    def count_prompt(self, messages: Sequence[ChatMessage], thinking: bool) -> int:
        """Tokens of the prompt generate would make of these messages (before any trim);
        an image counts the positions its embeddings take (mtmd_tokenize cuts the prompt
        and sizes each image; it takes the projector's context const, and no image is
        encoded, so this too may run beside an answer). ImageRefused as generate's."""
        prep = self._prep()
        images = self._images(messages, prep)
        if images is None:
            return len(self._prompt(self._spec(messages, template_variables(thinking), prep=prep).text, prep))
        try:
            return len(images.tokenize(self._spec(messages, template_variables(thinking), images=images,
                                                  prep=prep).text))
        finally:
            images.close()

    def _prep(self, cancelled: Callable[[], bool] | None = None) -> PromptPrep:
        """A request's prompt preparation: outside text's control-token text is found by
        the vocabulary's own special tokens (app/engine/templates/outside_text.py)."""
        return PromptPrep(self._prompt_tokens.control_spans, self._info.chat_template, cancelled)

    def _prompt(self, text: str, prep: PromptPrep | None = None) -> list[int]:
        """A prompt's ids: its plain spans (those of a prompt prep rendered) read as text."""
        return self._prompt_tokens.prompt(text, prep.plain(text) if prep else (), prep.cancelled if prep else None)

    def _images(self, messages: Sequence[ChatMessage], prep: PromptPrep) -> ImagePrompt | None:
        return images_for(messages, self._projector, model=self._info.path.name, problem=self.loaded.vision_problem,
                          tokens=self._prompt_tokens, prep=prep)

    def _grammar(self, shape: AnswerShape, shaped: ShapedAnswer) -> llama_cpp.LlamaGrammar | None:
        """The answer's grammar (app/engine/backends/llama/grammar.py): the forced call's, the one
        asked for, the JSON schema's or any JSON object's, within llama.cpp's bounds. ShapeRefused
        when llama.cpp cannot read it (it says why on its log)."""
        made = answer_grammar(shape, shaped)
        if made is None:
            return None
        text, part = made
        native_log.clear()
        if not self._readable(text):
            why = "; ".join(native_log.recent_errors()) or "it is not GBNF with a root rule"
            raise ShapeRefused(BadShape(part, f"llama.cpp cannot read it: {why}"))
        return llama_cpp.LlamaGrammar.from_string(text, verbose=False)

    def _readable(self, grammar: str) -> bool:
        """Whether llama.cpp's parser takes the grammar: llama-cpp-python adds one it cannot
        read to the sampler chain as a null pointer, so each is parsed once first."""
        sampler = llama_cpp.llama_sampler_init_grammar(self._vocab, grammar.encode("utf-8"), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    def _use_threads(self, threads: int) -> int:
        """Decode this answer with `threads` CPU threads (llama.cpp changes them in place)."""
        if threads != self._threads:
            llama_cpp.llama_set_n_threads(self._llm._ctx.ctx, threads, threads)
            self._threads = threads
        return threads

    def _spec(self, messages: Sequence[ChatMessage], variables: dict[str, bool] | None = None,
              shaped: ShapedAnswer = PLAIN, images: ImagePrompt | None = None,
              prep: PromptPrep | None = None) -> PromptSpec:
        prep = prep or self._prep()
        marked = messages if images is None or self._projector is None else with_markers(messages,
                                                                                           self._projector.marker)
        spec = build_prompt(marked, template=self._info.chat_template, architecture=self._info.architecture,
                            tokens=self._tokens, variables=variables, tools=shaped.tools, shield=prep.shield,
                            cancelled=prep.cancelled)
        prep.keep(spec.text, spec.plain)
        if images is not None:
            images.remember(spec.text, messages)
        return spec

    def _stream(self, request: Generate, prompt: list[int], budget: int, text: AnswerText,
                control: GenerationControl, timing: AnswerTiming,
                grammar: llama_cpp.LlamaGrammar | None = None, lazy: LazyCallGrammar | None = None,
                images: ImagePrompt | None = None) -> Generator[Delta, None, FinishReason]:
        llm = self._llm
        settings = request.settings
        seed = settings.seed if settings.seed >= 0 else random.getrandbits(32)
        llm.set_seed(seed)
        llm.evaluated = 0
        self._restore_state(prompt)
        if images is not None and self._projector is not None:
            # The images and the text around them go in here; llm.generate then finds the
            # whole prompt in the cache (app/engine/backends/llama/image_prompt.py).
            image_tokens = evaluate(llm, self._projector, images.chunked_for(prompt))
            llm.evaluated += image_tokens  # its text tokens counted themselves
        sampling: dict[str, Any] = dict(top_k=settings.top_k, top_p=settings.top_p, min_p=settings.min_p,
                                        temp=settings.temperature, repeat_penalty=settings.repeat_penalty)
        self.lookup = LookupStats()
        # A grammar's answer is not drafted: a rejected draft token would have moved the grammar
        # on. Nor is one that may switch to a grammar mid-answer (a drafted token may be past the switch).
        drafted = request.prompt_lookup != PromptLookupMode.OFF and grammar is None and lazy is None
        if drafted:
            tokens = lookup_tokens(llm, prompt, sampling, mode=request.prompt_lookup, limit=budget, stats=self.lookup)
        elif lazy is not None:
            tokens = self._switching(prompt, sampling, lazy, seed)
        else:
            tokens = llm.generate(prompt, grammar=grammar, **sampling)
        finish = FinishReason.LENGTH if budget == settings.max_tokens else FinishReason.CONTEXT

        def first_token() -> None:
            timing.evaluated = llm.evaluated

        try:
            return (yield from stream_tokens(
                request.request_id, tokens, is_end=self._is_end, piece=self._piece, answer=text,
                budget=budget, finish=finish, control=control, timing=timing, on_first=first_token))
        finally:
            tokens.close()

    def _switching(self, prompt: list[int], sampling: dict[str, Any], lazy: LazyCallGrammar,
                   seed: int) -> Generator[int, None, None]:
        """The answer's tokens, switching grammars when the lazy grammar says (between two
        tokens): a switch ends one llm.generate and starts another on the prompt and the
        tokens so far, whose prefix match keeps the KV cache (only the last token, not yet
        evaluated, is evaluated: the work going on would have done). Each new sampler chain
        gets the next seed, so its draws do not replay the answer's first ones."""
        so_far = list(prompt)
        grammar: llama_cpp.LlamaGrammar | None = None
        while True:
            tokens = self._llm.generate(so_far, grammar=grammar, **sampling)
            try:
                for token in tokens:
                    so_far.append(token)
                    yield token
                    switch = lazy.take()
                    if switch is not None:
                        grammar = None if switch.grammar is None else llama_cpp.LlamaGrammar.from_string(
                            switch.grammar, verbose=False)
                        seed = (seed + 1) & 0xFFFFFFFF
                        self._llm.set_seed(seed)
                        break
                else:
                    return
            finally:
                tokens.close()

    def _restore_state(self, prompt: list[int]) -> None:
        """Put back a saved state when it spares more of the prompt than the cache holds now;
        llm.generate then evaluates only what follows it."""
        self.restored_from = ""
        llm = self._llm
        if self._states is None:
            return
        found = self._states.find(prompt, common_prefix(llm._input_ids.tolist(), prompt))
        if found is None:
            return
        if kv_state.restore(llm._ctx.ctx, found.data):
            llm.input_ids[:len(found.tokens)] = found.tokens
            llm.n_tokens = len(found.tokens)
            self.restored_from = found.source
        else:
            llm.n_tokens = 0  # llama.cpp refused it and sequence 0 is empty now
        llm._requires_eval = True

    def _save_state(self) -> None:
        llm = self._llm
        if self._states is not None and llm.n_tokens >= _SAVE_FROM:
            data, partial = kv_state.capture(llm._ctx.ctx)
            self._states.save(llm._input_ids.tolist(), data, partial)

    def _is_end(self, token: int) -> bool:
        return llama_cpp.llama_vocab_is_eog(self._vocab, token)

    def _piece(self, token: int) -> bytes:
        buffer = self._piece_buffer
        size = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, len(buffer), 0, False)
        if size < 0:
            # llama.cpp says how big the buffer must be for this piece.
            self._piece_buffer = buffer = ctypes.create_string_buffer(-size)
            size = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, len(buffer), 0, False)
        return buffer.raw[:size]


# Shorter conversations are evaluated again faster than a state is found and read.
_SAVE_FROM = 64


def _state_store(request: Load, info: GgufInfo, context_length: int) -> StateStore | None:
    if request.state_ram_bytes <= 0 and request.state_disk_bytes <= 0:
        return None
    key = kv_state.StateKey.of(request.model_path, context_length, info.chat_template or "")
    folder = Path(request.state_dir) if request.state_dir and request.state_disk_bytes > 0 else None
    # The key that signs the files lives in the data folder, away from the cache they are in.
    secret = cache_files.install_secret(data_paths().data) if folder is not None else None
    try:
        if folder is not None and secret is not None:
            return StateStore(key, folder, request.state_disk_bytes, ram_budget=request.state_ram_bytes,
                              secret=secret)
    except OSError:  # the cache folder cannot be made or read: RAM only
        pass
    return StateStore(key, None, 0, ram_budget=request.state_ram_bytes)


def _refused(info: GgufInfo, exc: Exception) -> GgufRefused:
    """Why llama.cpp refused: what it logged, which says more than the exception."""
    reason = "; ".join(native_log.recent_errors()) or str(exc)
    return GgufRefused(info.path.name, info.architecture, reason)


__all__ = ["GgufBackend", "ModelFileError", "ModelLoadError"]
