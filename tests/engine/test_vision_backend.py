"""Images through the GGUF backend and real llama.cpp/libmtmd, on the tiny vision pair of
tests/helpers/vision_gguf.py (random weights: the answers are nonsense, the numbers are not)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from app.core.generation import GenerationSettings
from app.engine.backends.backend import DeviceChoice
from app.engine.control import GenerationControl
from app.engine.errors import ContextOverflow, ImageRefused
from app.engine.failures import BadImage, ErrorKind, ImageTrouble, NoVision
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.backends.llama.image_prompt import MAX_IMAGES, stand_ins
from app.engine.backends.llama.prompt_lookup import NgramDrafter
from app.engine.protocol import ChatMessage, Delta, Done, Generate, Load
from tests.helpers.vision_gguf import IMAGE_TOKENS, IMAGE_WRAP, build_mmproj_gguf, build_vision_pair, png_bytes

CPU = DeviceChoice("CPU")
PNG = png_bytes()
# Each image costs its embeddings, the projector's wrapping tokens, and the newline after its marker.
IMAGE_COST = IMAGE_TOKENS + len(IMAGE_WRAP) + 1


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_vision_pair(tmp_path_factory.mktemp("vision"))


def _load(model: Path, projector: Path | str | None, context: int = 1024, **options: object) -> GgufBackend:
    return GgufBackend.load(Load(1, str(model), context_length=context, threads=1,
                                 projector_path=str(projector) if projector else None, **options), CPU)  # type: ignore[arg-type]


@pytest.fixture
def seeing(pair: tuple[Path, Path]) -> Iterator[GgufBackend]:
    backend = _load(*pair)
    yield backend
    backend.close()


def _answer(backend: GgufBackend, messages: list[ChatMessage], tokens: int = 10) -> tuple[str, Done]:
    control = GenerationControl()
    control.begin(1)
    request = Generate(1, tuple(messages), GenerationSettings(temperature=0.0, max_tokens=tokens, seed=1))
    text, done = "", None
    for event in backend.generate(request, control):
        if isinstance(event, Delta):
            text += event.text
        else:
            done = event
    assert isinstance(done, Done)
    return text, done


def _refusal(backend: GgufBackend, messages: list[ChatMessage]) -> ImageRefused:
    with pytest.raises(ImageRefused) as refused:
        _answer(backend, messages)
    return refused.value


def test_the_pair_loads_with_vision(seeing: GgufBackend) -> None:
    assert seeing.loaded.vision is True
    assert seeing.loaded.vision_problem == ""


def test_an_image_costs_its_tokens_and_is_evaluated(seeing: GgufBackend) -> None:
    _, plain = _answer(seeing, [ChatMessage("user", "What is this?")])
    seeing.reset()
    text, pictured = _answer(seeing, [ChatMessage("user", "What is this?", images=(PNG,))])

    assert text
    assert pictured.stats.prompt_tokens == plain.stats.prompt_tokens + IMAGE_COST
    # Nothing was cached: every position was evaluated, the image's included.
    assert pictured.stats.prompt_tokens_evaluated == pictured.stats.prompt_tokens
    counted = seeing.count_prompt([ChatMessage("user", "What is this?", images=(PNG,))], True)
    assert counted == pictured.stats.prompt_tokens
    two = seeing.count_prompt([ChatMessage("user", "What is this?", images=(PNG, png_bytes(seed=2)))], True)
    assert two == counted + IMAGE_TOKENS + len(IMAGE_WRAP)


def test_a_follow_up_reuses_the_image_and_answers_as_a_fresh_engine(pair: tuple[Path, Path],
                                                                     seeing: GgufBackend) -> None:
    first = [ChatMessage("user", "Describe the picture.", images=(PNG,))]
    reply, opened = _answer(seeing, first)
    follow_up = first + [ChatMessage("assistant", reply), ChatMessage("user", "And the colours?")]
    text, done = _answer(seeing, follow_up)

    fresh = _load(*pair)
    try:
        fresh_text, fresh_done = _answer(fresh, follow_up)
    finally:
        fresh.close()
    assert (text, done.stats.prompt_tokens) == (fresh_text, fresh_done.stats.prompt_tokens)
    assert fresh_done.stats.prompt_tokens_evaluated == fresh_done.stats.prompt_tokens
    # The cached turn (its image with it) was not evaluated again.
    assert done.stats.prompt_tokens_evaluated < done.stats.prompt_tokens - opened.stats.prompt_tokens + 2


def test_another_image_in_the_same_place_is_not_reused(seeing: GgufBackend) -> None:
    _answer(seeing, [ChatMessage("user", "Look.", images=(PNG,))])
    _, other = _answer(seeing, [ChatMessage("user", "Look.", images=(png_bytes(seed=5),))])
    # Only the text before the image matched: the new image and all after it were evaluated.
    assert other.stats.prompt_tokens_evaluated >= IMAGE_TOKENS + 1 + len("Look.")


def test_garbage_is_refused_by_index_and_the_model_still_answers(seeing: GgufBackend) -> None:
    broken = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
    refused = _refusal(seeing, [ChatMessage("user", "one", images=(PNG,)), ChatMessage("assistant", "ok"),
                                ChatMessage("user", "two", images=(PNG, broken))])
    assert refused.failure == BadImage(ImageTrouble.NOT_AN_IMAGE, 2, 1)
    assert refused.failure.kind == ErrorKind.BAD_IMAGE
    assert "Image 2 of message 3" in str(refused)
    assert _refusal(seeing, [ChatMessage("user", "x", images=(b"GIF89a....",))]).failure == BadImage(
        ImageTrouble.NOT_AN_IMAGE, 0, 0)

    text, done = _answer(seeing, [ChatMessage("user", "Plain words now.")])
    assert text and done.stats.prompt_tokens > 0
    text, _ = _answer(seeing, [ChatMessage("user", "And a picture.", images=(PNG,))])
    assert text


def test_limits_on_count_and_size(seeing: GgufBackend) -> None:
    many = [ChatMessage("user", "see", images=(PNG,) * MAX_IMAGES), ChatMessage("assistant", "ok"),
            ChatMessage("user", "again", images=(PNG,))]
    assert _refusal(seeing, many).failure == BadImage(ImageTrouble.TOO_MANY, count=MAX_IMAGES + 1, limit=MAX_IMAGES)
    huge = PNG + bytes(20_000_001)
    refused = _refusal(seeing, [ChatMessage("user", "big", images=(PNG, huge))])
    assert refused.failure == BadImage(ImageTrouble.TOO_BIG, 0, 1, len(huge), 20_000_000)
    with pytest.raises(ImageRefused):
        seeing.count_prompt(many, True)


def test_images_that_do_not_fit_the_context(pair: tuple[Path, Path]) -> None:
    backend = _load(*pair, context=256)
    try:
        text = "words " * 10
        _answer(backend, [ChatMessage("user", text, images=(PNG,) * 2)])  # fits
        crowded = [ChatMessage("user", text, images=(PNG,) * MAX_IMAGES)]
        with pytest.raises(ContextOverflow) as overflow:
            _answer(backend, crowded)
        assert overflow.value.prompt_tokens == backend.count_prompt(crowded, True) > 256
        assert overflow.value.context_length == 256
    finally:
        backend.close()


def test_images_to_a_model_without_a_projector(pair: tuple[Path, Path]) -> None:
    backend = _load(pair[0], None)
    try:
        assert (backend.loaded.vision, backend.loaded.vision_problem) == (False, "")
        refused = _refusal(backend, [ChatMessage("user", "see", images=(PNG,))])
        assert refused.failure == NoVision("tiny-vision.gguf")
        assert refused.failure.kind == ErrorKind.NO_VISION
        with pytest.raises(ImageRefused):
            backend.count_prompt([ChatMessage("user", "see", images=(PNG,))], True)
        assert _answer(backend, [ChatMessage("user", "Just text.")])[0]
    finally:
        backend.close()


@pytest.mark.parametrize("legacy", [False, True], ids=["header", "mtmd"])
def test_a_projector_for_another_model_is_refused_in_words(pair: tuple[Path, Path], tmp_path: Path,
                                                           legacy: bool) -> None:
    """A current projector is refused from its header; an older one (whose projection_dim
    is not trusted) by mtmd, whose log gives the width."""
    wide = build_mmproj_gguf(tmp_path / "mmproj-wide.gguf", projection_dim=2560, legacy=legacy)
    backend = _load(pair[0], wide)
    try:
        assert backend.loaded.vision is False
        assert backend.loaded.vision_problem == (
            "The vision projector mmproj-wide.gguf could not be loaded: it was made for a model with 2,560-wide "
            "embeddings, not this one's 64. Pair the model with its own projector.")
        refused = _refusal(backend, [ChatMessage("user", "see", images=(PNG,))])
        assert refused.failure == NoVision("tiny-vision.gguf", backend.loaded.vision_problem)
        assert _answer(backend, [ChatMessage("user", "Text still works.")])[0]
    finally:
        backend.close()


def test_a_missing_or_wrong_projector_file_is_said_in_words(pair: tuple[Path, Path], tmp_path: Path) -> None:
    missing = _load(pair[0], tmp_path / "mmproj-gone.gguf")
    wrong = _load(pair[0], pair[0])
    (tmp_path / "mmproj-cut.gguf").write_bytes(pair[1].read_bytes()[:300])
    cut = _load(pair[0], tmp_path / "mmproj-cut.gguf")
    try:
        assert missing.loaded.vision_problem == (
            "The vision projector mmproj-gone.gguf could not be loaded: the file is not there. Pair the model "
            "with its projector again.")
        assert wrong.loaded.vision_problem == (
            "The vision projector tiny-vision.gguf could not be loaded: it is not a vision projector (its header "
            "says architecture 'llama'). Pair the model with its own projector.")
        assert cut.loaded.vision_problem.startswith("The vision projector mmproj-cut.gguf could not be loaded: ")
        assert cut.loaded.vision_problem.endswith("Download the projector again.")
        assert not (missing.loaded.vision or wrong.loaded.vision or cut.loaded.vision)
    finally:
        for backend in (missing, wrong, cut):
            backend.close()


def test_a_saved_state_with_an_image_is_restored_exactly(pair: tuple[Path, Path]) -> None:
    """Chat A (an image), chat B, then A's follow-up: restored from RAM, as in memory."""
    first = [ChatMessage("user", "Tell me about this picture. " * 4, images=(PNG,))]
    plain = _load(*pair)
    try:
        reply, _ = _answer(plain, first)
        follow_up = first + [ChatMessage("assistant", reply), ChatMessage("user", "More?")]
        in_memory, _ = _answer(plain, follow_up)
    finally:
        plain.close()
    saving = _load(*pair, state_ram_bytes=1 << 28)
    try:
        again, opened = _answer(saving, first)
        assert again == reply
        _answer(saving, [ChatMessage("user", "Something else entirely, no picture at all here.")])
        restored, done = _answer(saving, follow_up)
        assert saving.restored_from == "ram"
        assert restored == in_memory
        # Only what follows chat A's first turn (its image in it) was evaluated.
        assert done.stats.prompt_tokens_evaluated < done.stats.prompt_tokens - opened.stats.prompt_tokens + 2
    finally:
        saving.close()


def test_stand_ins_are_negative_and_follow_the_image() -> None:
    ids = stand_ins(b"abc", 64)
    assert len(ids) == 64 and all(i < 0 for i in ids)
    assert stand_ins(b"abc", 64) == ids
    assert stand_ins(b"abd", 64) != ids


def test_drafts_never_hold_an_image_position() -> None:
    drafter = NgramDrafter([5, 6, 7, -3, -4, 9, 5, 6])
    assert drafter.propose(4) == [7]
    assert NgramDrafter([5, 6, 7, 8, 5, 6]).propose(2) == [7, 8]


def test_old_image_turns_are_left_out_with_their_images(pair: tuple[Path, Path]) -> None:
    backend = _load(*pair, context=256)
    try:
        chat = [ChatMessage("user", "first look", images=(PNG,) * 6), ChatMessage("assistant", "a picture"),
                ChatMessage("user", "second look", images=(png_bytes(seed=3),) * 6), ChatMessage("assistant", "more"),
                ChatMessage("user", "and now?", images=(png_bytes(seed=4),))]
        control = GenerationControl()
        control.begin(1)
        request = Generate(1, tuple(chat), GenerationSettings(temperature=0.0, max_tokens=4, seed=1), trim_history=True)
        events = list(backend.generate(request, control))
        done = events[-1]
        assert isinstance(done, Done) and done.stats.messages_left_out >= 2
        kept = [m for m in chat if m.role.value == "user"][-1:]
        assert done.stats.prompt_tokens >= backend.count_prompt(kept, True)
        assert any(isinstance(e, Delta) and e.text for e in events)
    finally:
        backend.close()


def test_text_that_looks_like_llama_cpps_marker_is_only_text(seeing: GgufBackend) -> None:
    messages = [ChatMessage("user", "<__media__> is written here <__media__>", images=(PNG,))]
    text, done = _answer(seeing, messages)
    assert text
    assert done.stats.prompt_tokens == seeing.count_prompt(messages, True)
    plain = seeing.count_prompt([ChatMessage("user", "<__media__> is written here <__media__>")], True)
    assert done.stats.prompt_tokens == plain + IMAGE_COST


def test_a_template_that_drops_images_is_refused_not_answered(pair: tuple[Path, Path]) -> None:
    last_only = ("{% for m in messages %}{% if loop.last %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                 "{% endif %}{% endfor %}<|im_start|>assistant\n")
    backend = _load(*pair, chat_template=last_only)
    try:
        chat = [ChatMessage("user", "look", images=(PNG,)), ChatMessage("assistant", "ok"),
                ChatMessage("user", "and this", images=(png_bytes(seed=9),))]
        assert _refusal(backend, chat).failure == BadImage(ImageTrouble.LEFT_OUT)
        assert _answer(backend, chat[2:])[0]
    finally:
        backend.close()
