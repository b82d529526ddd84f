"""The image check on real files made with Pillow: what it keeps, what it changes, what it refuses and why."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from PIL import Image

from app.core.attachments import AttachedImage, image_type, is_image_path
from app.documents.image_check import (LONG_SIDE, MAX_FILE_BYTES, PNG_LIMIT, ImageProblem, ImageRefusal, PastedImage,
                                       check_image)
from tests.helpers.images import bomb_png, image_bytes, write_image


def _kept(result: AttachedImage | ImageRefusal) -> AttachedImage:
    assert isinstance(result, AttachedImage), result
    return result


def _refused(result: AttachedImage | ImageRefusal) -> ImageRefusal:
    assert isinstance(result, ImageRefusal), result
    return result


def _decoded(image: AttachedImage) -> Image.Image:
    decoded = Image.open(io.BytesIO(image.data))
    decoded.load()
    return decoded


def test_a_small_png_is_kept_as_a_png_of_the_same_size(tmp_path: Path) -> None:
    image = _kept(check_image(write_image(tmp_path / "chart.png", 640, 480)))
    assert (image.name, image.mime, image.width, image.height, image.note) == ("chart.png", "image/png", 640, 480, "")
    assert _decoded(image).getpixel((10, 10)) == (200, 40, 40)


@pytest.mark.parametrize("fmt, suffix", [("JPEG", ".jpg"), ("WEBP", ".webp"), ("GIF", ".gif"), ("BMP", ".bmp")])
def test_every_type_it_reads_comes_out_as_png_or_jpeg(tmp_path: Path, fmt: str, suffix: str) -> None:
    image = _kept(check_image(write_image(tmp_path / f"picture{suffix}", 300, 200, fmt)))
    assert image.mime in ("image/png", "image/jpeg") and image_type(image.data) == image.mime
    assert (image.width, image.height) == (300, 200)


def test_a_photo_is_scaled_down_said_in_the_note_and_written_as_jpeg(tmp_path: Path) -> None:
    path = write_image(tmp_path / "photo.jpg", 4032, 3024, "JPEG", color=(), quality=95)
    image = _kept(check_image(path))
    assert (image.width, image.height) == (LONG_SIDE, 1152)
    assert image.note == "Scaled down from 4,032 x 3,024."
    assert image.mime == "image/jpeg" and len(image.data) > PNG_LIMIT // 10  # noise does not compress as PNG
    assert _decoded(image).size == (LONG_SIDE, 1152)


def test_exif_orientation_is_applied_and_the_metadata_dropped(tmp_path: Path) -> None:
    # Orientation 6: the camera was turned; a viewer shows the 200 x 100 pixels as 100 x 200.
    path = write_image(tmp_path / "turned.jpg", 200, 100, "JPEG", exif_orientation=6)
    image = _kept(check_image(path))
    assert (image.width, image.height) == (100, 200)
    decoded = _decoded(image)
    assert decoded.size == (100, 200) and not decoded.getexif() and "icc_profile" not in decoded.info


def test_transparency_is_put_on_white(tmp_path: Path) -> None:
    path = write_image(tmp_path / "logo.png", 50, 50, mode="RGBA", color=(0, 0, 0, 0))
    image = _kept(check_image(path))
    decoded = _decoded(image)
    assert decoded.mode == "RGB" and decoded.getpixel((25, 25)) == (255, 255, 255)


def test_pasted_bytes_are_checked_the_same_way() -> None:
    image = _kept(check_image(PastedImage(image_bytes(64, 32))))
    assert (image.name, image.width, image.height) == ("Pasted image", 64, 32)


def test_text_named_as_an_image_is_refused_as_text(tmp_path: Path) -> None:
    path = tmp_path / "notes.jpg"
    path.write_text("Meeting notes: buy milk, call Anna.\n", encoding="utf-8")
    refused = _refused(check_image(path))
    assert refused.name == str(path) and refused.problem is ImageProblem.NOT_AN_IMAGE
    assert refused.reason == "it is not an image: it holds text"


def test_other_bytes_are_refused_naming_the_types_it_reads(tmp_path: Path) -> None:
    path = tmp_path / "archive.png"
    path.write_bytes(b"PK\x03\x04" + os.urandom(200))
    refused = _refused(check_image(path))
    assert refused.problem is ImageProblem.NOT_AN_IMAGE and "PNG, JPEG, WebP, GIF or BMP" in refused.reason


def test_a_truncated_png_is_refused_as_damaged(tmp_path: Path) -> None:
    whole = image_bytes(400, 400, color=())
    path = tmp_path / "cut.png"
    path.write_bytes(whole[: len(whole) // 2])
    refused = _refused(check_image(path))
    assert refused.problem is ImageProblem.DAMAGED and "damaged" in refused.reason


def test_a_bomb_is_refused_from_its_header_before_it_is_decoded(tmp_path: Path) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb_png(50_000, 50_000))
    refused = _refused(check_image(path))
    assert refused.problem is ImageProblem.TOO_LARGE
    assert "2,500 megapixels" in refused.reason and "100 megapixels" in refused.reason


def test_an_image_just_over_the_pixel_limit_is_refused_with_its_size(tmp_path: Path) -> None:
    path = tmp_path / "wide.png"
    path.write_bytes(bomb_png(12_000, 9_000))  # 108 megapixels: Pillow only warns here
    refused = _refused(check_image(path))
    assert refused.problem is ImageProblem.TOO_LARGE and "12,000 x 9,000 pixels" in refused.reason


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.png"
    with path.open("wb") as file:
        file.write(image_bytes(10, 10))
        file.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk taken
    refused = _refused(check_image(path))
    assert refused.problem is ImageProblem.TOO_LARGE and "30 MB" in refused.reason


def test_a_missing_file_and_a_folder_are_refused_in_words(tmp_path: Path) -> None:
    missing = _refused(check_image(tmp_path / "gone.png"))
    assert missing.problem is ImageProblem.NO_ACCESS and "cannot be opened" in missing.reason
    folder = _refused(check_image(tmp_path))
    assert folder.problem is ImageProblem.NO_ACCESS and "folder" in folder.reason


def test_image_paths_are_told_by_their_suffix_in_any_case() -> None:
    assert is_image_path("a/B.PNG") and is_image_path(Path("x.jpeg")) and is_image_path("y.WebP")
    assert not is_image_path("report.pdf") and not is_image_path("png")
