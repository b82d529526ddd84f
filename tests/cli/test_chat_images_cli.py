"""`kestrel chat --image FILE` as a user runs it: real processes, the image check's child process."""

from __future__ import annotations

from pathlib import Path

from collections.abc import Iterator, Sequence

import pytest

from app.cli.chat_images import EXIT_UNREADABLE, chat_images, refuse_unseeing
from app.documents.image_check import ImageInput, ImageResult
from app.documents.limited_child import LimitedChild
from app.cli.user_error import EXIT_MODEL, UserError
from app.engine.protocol import Loaded
from app.library.installed import InstalledModel
from tests.cli.test_chat_cli import assert_no_traceback, json_lines, kestrel
from tests.documents.test_limited_child import die_at_start
from tests.helpers.images import write_image


def test_a_model_without_vision_is_refused_naming_it_and_what_to_do(tiny_model: Path, tmp_path: Path) -> None:
    chart = write_image(tmp_path / "chart.png", 64, 48)
    result = kestrel("chat", "--model", str(tiny_model), "--image", str(chart), "What is this?")
    assert result.returncode == EXIT_MODEL, result.stderr
    assert f"{tiny_model.name} cannot see images: it has no vision projector" in result.stderr
    assert "--model" in result.stderr and "Gemma 3 4B" in result.stderr and "leave out --image" in result.stderr
    assert result.stdout == ""
    assert_no_traceback(result)


def test_an_image_that_will_not_do_is_named_with_why_and_nothing_is_sent(tiny_model: Path, tmp_path: Path) -> None:
    chart = write_image(tmp_path / "chart.png", 64, 48)
    notes = tmp_path / "notes.jpg"
    notes.write_text("Buy milk.", encoding="utf-8")
    result = kestrel("chat", "--model", str(tiny_model), "--json", "--image", str(chart), "--image", str(notes),
                     "--image", str(tmp_path / "gone.png"), "What are these?")
    assert result.returncode == 3, result.stderr
    assert f"{notes} cannot be used: it is not an image: it holds text." in result.stderr
    assert f"{tmp_path / 'gone.png'} cannot be used: it cannot be opened" in result.stderr
    assert str(chart) not in result.stderr
    [line] = json_lines(result.stdout)
    assert line["type"] == "error" and line["status"] == 3
    assert_no_traceback(result)


def test_more_than_eight_images_are_refused(tiny_model: Path, tmp_path: Path) -> None:
    chart = write_image(tmp_path / "chart.png", 8, 8)
    result = kestrel("chat", "--model", str(tiny_model), *["--image", str(chart)] * 9, "-", stdin="Look")
    assert result.returncode == 3 and "a message takes at most 8" in result.stderr, result.stderr


def test_a_projector_that_did_not_load_is_said_with_the_engines_words() -> None:
    model = InstalledModel("gemma", "Gemma 3 4B", Path("gemma.gguf"), 1, None, "test", 0.0, "gguf",
                           projector=Path("mmproj.gguf"))
    loaded = Loaded(1, "gemma.gguf", 10.0, "cpu", 4096, 4, "gemma3", "gemma", vision=False,
                    vision_problem="The projector file is damaged.")
    try:
        refuse_unseeing(model, loaded)
    except UserError as refused:
        assert refused.status == EXIT_MODEL
        assert str(refused).startswith("The projector file is damaged. The images were not sent")
    else:
        raise AssertionError("a model whose projector did not load took images")
    refuse_unseeing(model, Loaded(1, "gemma.gguf", 10.0, "cpu", 4096, 4, "gemma3", "gemma", vision=True))


def a_check_that_cannot_start(items: Sequence[ImageInput]) -> Iterator[ImageResult]:
    """The image check's child as it is when it dies before it is ready (a real child, ended at start)."""
    child: LimitedChild[ImageResult] = LimitedChild(die_at_start, (), name="kestrel-image-check", role="image check")
    try:
        for item in items:
            answer = child.ask(item, 5)
            raise AssertionError(f"the child answered: {answer}")
        yield from ()
    finally:
        child.close()


def test_an_image_check_that_cannot_start_is_said_in_words(tmp_path: Path) -> None:
    image = write_image(tmp_path / "photo.png", 20, 10)
    with pytest.raises(UserError) as refused:
        chat_images([str(image)], a_check_that_cannot_start)
    assert refused.value.status == EXIT_UNREADABLE
    assert str(refused.value).startswith("Kestrel could not start its image check: the image check process did "
                                         "not start.")
