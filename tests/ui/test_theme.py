"""The palettes: every text colour readable on what it is drawn on, in both themes."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QToolButton

from app.ui.common import icons
from app.ui.common.theme import TEXT_PAIRS, apply_theme, contrast, disabled_text, palette_colors

R = QPalette.ColorRole


def test_contrast_matches_wcag_reference_values():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#ffffff", "#ffffff") == pytest.approx(1.0)
    # WCAG's own example: #767676 on white is the lightest grey that passes AA.
    assert contrast("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_text_meets_wcag_aa_on_its_backgrounds(dark):
    colors = palette_colors(dark)
    failing = [(text.name, background.name, round(contrast(colors[text], colors[background]), 2))
               for text, background in TEXT_PAIRS if contrast(colors[text], colors[background]) < 4.5]
    assert failing == []


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_disabled_text_is_dimmer_yet_readable(dark):
    colors = palette_colors(dark)
    for background in (R.Window, R.Button, R.Base):
        assert 3.0 <= contrast(disabled_text(dark), colors[background]) < contrast(colors[R.Text], colors[background])


def test_switching_theme_recolours_themed_icons(qapp):
    button = QToolButton()
    apply_theme(qapp, "light")
    icons.themed(button, "copy")
    light = button.icon().pixmap(32, 32).toImage()
    apply_theme(qapp, "dark")
    dark = button.icon().pixmap(32, 32).toImage()
    assert light != dark
    apply_theme(qapp, "light")
    assert button.icon().pixmap(32, 32).toImage() == light


@pytest.mark.parametrize("kind", ["check box", "radio button"])
@pytest.mark.parametrize("dark", [False, True])
def test_a_check_box_and_a_radio_buttons_frame_stand_out_from_the_field(qapp, qtbot, dark, kind):
    """Fusion draws their frame in the window colour darkened: on the dark palette it was all
    but black on the dark field (the chat settings' tool list, the model form's "the app's")."""
    from PySide6.QtWidgets import QCheckBox, QRadioButton, QStyle, QStyleOptionButton, QWidget

    apply_theme(qapp, "dark" if dark else "light")
    try:
        page = QWidget()
        qtbot.addWidget(page)
        page.setAutoFillBackground(True)
        page.setBackgroundRole(QPalette.ColorRole.Base)
        box = (QCheckBox if kind == "check box" else QRadioButton)("files", page)
        box.move(10, 10)
        page.resize(120, 40)
        page.show()
        option = QStyleOptionButton()
        box.initStyleOption(option)
        element = (QStyle.SubElement.SE_CheckBoxIndicator if kind == "check box"
                   else QStyle.SubElement.SE_RadioButtonIndicator)
        indicator = box.style().subElementRect(element, option, box)
        image = box.grab().toImage()
        edge = [image.pixelColor(indicator.left() + dx, indicator.center().y()).name() for dx in range(3)]
        field = palette_colors(dark)[QPalette.ColorRole.Base]
        assert max(contrast(colour, field) for colour in edge) >= 3.0, (edge, field)
    finally:
        apply_theme(qapp, "light")
