"""A prompt that holds images: the images checked and decoded once, the rendered prompt cut
into text and image chunks (the images' by libmtmd), and those chunks evaluated into the KV cache.

Each image turn's content gets one marker per image before its text (as llama.cpp's
server does for image parts); the chat template renders as usual; the text is cut at the
markers, the text between them tokenized as every prompt is (app/engine/backends/llama/prompt_tokens.py:
only the template's markers become control tokens), and each image's chunks made by
mtmd_tokenize of its marker alone (with whatever text the projector wraps an image in,
such as Gemma 3's "<start_of_image>"). mtmd_tokenize of the whole text would read every
control token's text in it as that token, and it cuts the text at the markers and
tokenizes each part apart just the same.

Kestrel's sampling loop (llama-cpp-python's Llama) keeps one token id per position of the
KV cache and reuses the longest matching prefix. An image has no token ids, so each of its
positions gets a stand-in id: negative (no real token is), drawn from a hash of the
projector and the image's bytes. The prompt's ids are then the text tokens with the
images' stand-ins in their places, and prefix reuse works as for text: the same image at
the same place matches (a second question about a picture does not encode it again);
another image, or the same one after other text, does not. A match that ends inside an
image goes back to the image's start: an image is evaluated whole or not at all. The
saved states (state_store.py) hold these ids too, so the same rules hold for them.
"""

from __future__ import annotations

import ctypes
import hashlib
from dataclasses import dataclass, field, replace
from typing import Sequence

import llama_cpp
import llama_cpp.mtmd_cpp as mtmd

from app.engine.backends.llama import native_log
from app.engine.errors import ImageRefused
from app.engine.failures import BadImage, ImageTrouble, NoVision
from app.engine.templates.outside_text import PromptPrep, Spans
from app.engine.backends.llama.prompt_tokens import GgufPromptTokens
from app.engine.protocol import ChatMessage
from app.engine.backends.llama.state_store import common_prefix
from app.engine.backends.llama.vision import Projector

MAX_IMAGES = 16  # in one prompt
MAX_IMAGE_BYTES = 20_000_000  # each (20 MB, as the words say it)
_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")  # PNG, JPEG: what Kestrel's image check makes


def has_images(messages: Sequence[ChatMessage]) -> bool:
    return any(message.images for message in messages)


def images_for(messages: Sequence[ChatMessage], projector: Projector | None, *, model: str, problem: str,
               tokens: GgufPromptTokens, prep: PromptPrep) -> ImagePrompt | None:
    """The request's images, checked and decoded; None without images. ImageRefused when
    the model takes none (problem: why its projector did not load) or an image is not one
    it can take. tokens: the model's prompt tokenizer; prep: the request's prompts."""
    if not has_images(messages):
        return None
    if projector is None:
        raise ImageRefused(NoVision(model, problem))
    check_images(messages)
    return ImagePrompt(projector, messages, tokens=tokens, prep=prep)


def check_images(messages: Sequence[ChatMessage]) -> None:
    """ImageRefused unless every image is within the limits and starts like a PNG or JPEG."""
    count = sum(len(message.images) for message in messages)
    if count > MAX_IMAGES:
        raise ImageRefused(BadImage(ImageTrouble.TOO_MANY, count=count, limit=MAX_IMAGES))
    for turn, message in enumerate(messages):
        for index, image in enumerate(message.images):
            if len(image) > MAX_IMAGE_BYTES:
                raise ImageRefused(BadImage(ImageTrouble.TOO_BIG, turn, index, len(image), MAX_IMAGE_BYTES))
            if not image.startswith(_SIGNATURES):
                raise ImageRefused(BadImage(ImageTrouble.NOT_AN_IMAGE, turn, index))


def with_markers(messages: Sequence[ChatMessage], marker: str) -> list[ChatMessage]:
    """The messages with one marker per image before each turn's text."""
    return [replace(m, content=marker * len(m.images) + ("\n" + m.content if m.content else ""))
            if m.images else m for m in messages]


@dataclass
class _Span:
    """One chunk of the prompt: where its positions start and end, and its text tokens
    (empty for an image, whose chunk is evaluated by mtmd)."""

    start: int
    end: int
    chunk: int
    tokens: list[int] = field(default_factory=list)

    @property
    def image(self) -> bool:
        return not self.tokens


@dataclass
class ChunkedPrompt:
    """One rendered prompt's text tokens and images' chunks (mtmd's, freed by free()), and
    the ids that stand for them."""

    text: str
    ids: list[int]
    spans: list[_Span]
    image_tokens: int
    mtmd_chunks: list[int]

    def free(self) -> None:
        for chunks in self.mtmd_chunks:
            mtmd.mtmd_input_chunks_free(chunks)
        self.mtmd_chunks.clear()


class ImagePrompt:
    """The images of one request, decoded once, and the prompts made with them.

    The engine's prompt fitting renders subsets of the messages (the oldest turns left
    out); remember() is told which messages each rendering holds, tokenize() then uses
    those messages' images in order. close() frees the images and the chunks.
    """

    def __init__(self, projector: Projector, messages: Sequence[ChatMessage], *, tokens: GgufPromptTokens,
                 prep: PromptPrep) -> None:
        self._projector = projector
        self._tokens = tokens
        self._prep = prep
        self._bitmaps: dict[int, list[int]] = {}  # id(message) -> its images' bitmaps
        self._texts: dict[str, list[int]] = {}  # a rendered prompt -> its bitmaps in order
        self._last: ChunkedPrompt | None = None
        self._by_ids: dict[tuple[int, ...], str] = {}
        native_log.capture_mtmd()
        try:
            for turn, message in enumerate(messages):
                if id(message) in self._bitmaps:
                    continue  # the same message object twice: its images are decoded once
                self._bitmaps[id(message)] = [self._decode(image, turn, index)
                                              for index, image in enumerate(message.images)]
        except BaseException:
            self.close()
            raise

    def _decode(self, image: bytes, turn: int, index: int) -> int:
        buffer = (ctypes.c_uint8 * len(image)).from_buffer_copy(image)
        bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(mtmd.mtmd_context_p(self._projector.ctx), buffer, len(image),
                                                       False)
        if not bitmap or mtmd.mtmd_bitmap_is_audio(bitmap):
            if bitmap:
                mtmd.mtmd_bitmap_free(bitmap)
            raise ImageRefused(BadImage(ImageTrouble.NOT_AN_IMAGE, turn, index))
        # The bitmap's id names its chunk; the stand-in ids come from it and the projector.
        digest = hashlib.sha256(self._projector.identity + image).hexdigest()
        mtmd.mtmd_bitmap_set_id(bitmap, digest.encode())
        return int(bitmap)

    def remember(self, text: str, messages: Sequence[ChatMessage]) -> None:
        """The prompt text rendered from these messages (their images, in order, are its)."""
        self._texts[text] = [bitmap for m in messages for bitmap in self._bitmaps.get(id(m), [])]

    def tokenize(self, text: str) -> list[int]:
        """The prompt's ids (text tokens, images' stand-ins); ImageRefused when the
        template left an image out."""
        chunked = self.chunked(text)
        self._by_ids[tuple(chunked.ids)] = text
        return chunked.ids

    def chunked_for(self, ids: Sequence[int]) -> ChunkedPrompt:
        """The chunks of the prompt whose ids tokenize() gave."""
        return self.chunked(self._by_ids[tuple(ids)])

    def chunked(self, text: str) -> ChunkedPrompt:
        if self._last is not None and self._last.text == text:
            return self._last
        bitmaps = self._texts[text]
        if text.count(self._projector.marker) != len(bitmaps):
            raise ImageRefused(BadImage(ImageTrouble.LEFT_OUT))
        if self._last is not None:
            self._last.free()
            self._last = None
        self._last = self._tokenize(text, bitmaps)
        return self._last

    def _tokenize(self, text: str, bitmaps: list[int]) -> ChunkedPrompt:
        """The text between the markers as every prompt's text (BOS as the text prompt gets
        it: not twice when the template writes it), each image as mtmd makes it."""
        marker = self._projector.marker
        before, after = self._tokens.ends(text, self._prep.plain(text))
        prompt = ChunkedPrompt(text, [], [], 0, [])
        run = list(before)  # text tokens not yet in a span
        offset = 0
        try:
            for index, part in enumerate(text.split(marker)):
                run += self._tokens.text(part, _within(self._prep.plain(text), offset, len(part)),
                                         self._prep.cancelled)
                offset += len(part) + len(marker)
                if index < len(bitmaps):
                    run = _add_image(prompt, self._projector, bitmaps[index], run)
            _add_text(prompt, run + after)
        except BaseException:
            prompt.free()
            raise
        return prompt

    def close(self) -> None:
        if self._last is not None:
            self._last.free()
            self._last = None
        for bitmaps in self._bitmaps.values():
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)
        self._bitmaps.clear()


def _within(spans: Spans, offset: int, length: int) -> Spans:
    """The spans inside text[offset:offset + length], counted from offset."""
    return tuple((start - offset, end - offset) for start, end in spans if offset <= start and end <= offset + length)


def _add_text(prompt: ChunkedPrompt, tokens: list[int]) -> None:
    if tokens:
        start = len(prompt.ids)
        prompt.ids += tokens
        prompt.spans.append(_Span(start, len(prompt.ids), 0, tokens))


def _add_image(prompt: ChunkedPrompt, projector: Projector, bitmap: int, run: list[int]) -> list[int]:
    """The image's chunks after the text so far: mtmd_tokenize of its marker alone. Text
    chunks (the projector's wrapping) join the text around them; returns the text run."""
    data = projector.marker.encode("utf-8")
    given = mtmd.mtmd_input_text()
    given.text, given.text_len, given.add_special, given.parse_special = data, len(data), False, True
    chunks = mtmd.mtmd_input_chunks_init()
    array = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
    result = mtmd.mtmd_tokenize(projector.ctx, chunks, ctypes.byref(given), array, 1)
    if result != 0:
        mtmd.mtmd_input_chunks_free(chunks)
        # 2: the image failed to preprocess.
        raise ImageRefused(BadImage(ImageTrouble.NOT_AN_IMAGE if result == 2 else ImageTrouble.LEFT_OUT))
    prompt.mtmd_chunks.append(int(chunks))
    for index in range(mtmd.mtmd_input_chunks_size(chunks)):
        chunk = mtmd.mtmd_input_chunks_get(chunks, index)
        if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
            count = ctypes.c_size_t()
            pointer = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(count))
            run = run + ([int(pointer[i]) for i in range(count.value)] if pointer else [])
            continue
        _add_text(prompt, run)
        run = []
        start = len(prompt.ids)
        positions = int(mtmd.mtmd_input_chunk_get_n_pos(chunk))
        prompt.image_tokens += int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))
        prompt.ids += stand_ins(mtmd.mtmd_input_chunk_get_id(chunk) or b"", positions)
        prompt.spans.append(_Span(start, len(prompt.ids), int(chunk)))
    return run


def stand_ins(image_id: bytes, count: int) -> list[int]:
    """count negative ids drawn from an image's id (its hash): the same image, the same ids."""
    stream = hashlib.shake_256(image_id).digest(4 * count)
    return [-1 - (int.from_bytes(stream[i:i + 4], "little") & 0x3FFFFFFF) for i in range(0, 4 * count, 4)]


def evaluate(llm: llama_cpp.Llama, projector: Projector, prompt: ChunkedPrompt) -> int:
    """Put the prompt into the KV cache, reusing what the cache holds of it: text through
    llm.eval, images through mtmd. Afterwards llm's tokens are the prompt's ids and the
    last logits the prompt's, so llm.generate samples at once. Returns the image tokens
    evaluated (text tokens are counted by the Llama itself)."""
    ids = prompt.ids
    if not ids or ids[-1] < 0:
        raise ValueError("a prompt with images must end in text (the template's opening of the answer)")
    keep = min(common_prefix(llm._input_ids.tolist(), ids), len(ids) - 1)
    for span in prompt.spans:
        if span.image and span.start < keep < span.end:
            keep = span.start  # an image is evaluated whole
    llm._ctx.kv_cache_seq_rm(-1, keep, -1)
    llm.n_tokens = keep
    evaluated = 0
    for span in prompt.spans:
        if span.end <= keep:
            continue
        if not span.image:
            llm.eval(span.tokens[max(0, keep - span.start):])
            continue
        new_past = llama_cpp.llama_pos(0)
        result = mtmd.mtmd_helper_eval_chunk_single(projector.ctx, llm._ctx.ctx, span.chunk, llm.n_tokens, 0,
                                                    llm.n_batch, False, ctypes.byref(new_past))
        if result != 0:
            llm.n_tokens = span.start
            raise RuntimeError(f"llama.cpp could not evaluate an image (error {result})")
        llm.input_ids[span.start:span.end] = ids[span.start:span.end]
        llm.n_tokens = new_past.value
        evaluated += int(mtmd.mtmd_input_chunk_get_n_tokens(span.chunk))
    return evaluated
