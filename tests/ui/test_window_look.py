"""One look for every dialog: the app's icons (never Qt's stock ones), placed on screen, a dark title bar, the user's locale."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QLocale, QMargins, QPoint, QRect, QSize
from PySide6.QtGui import QAction, QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import (QApplication, QDialog, QDialogButtonBox, QLineEdit, QMessageBox, QProxyStyle, QStyle,
                               QStyleFactory, QWidget)

from app.ui.app import use_system_locale
from app.ui.common.app_style import NAME_PREFIX, STANDARD_ICONS, AppStyle, palette_icon
from app.ui.common.theme import build_palette
from app.ui.common.window_look import DialogLook, placed_at, use_dark_title_bar

ROOT = Path(__file__).resolve().parents[2]
SP = QStyle.StandardPixmap
OK_CANCEL = QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel


def icons_on_buttons(base: type) -> QProxyStyle:
    """base (a proxy style) as under GNOME or KDE, whose dialog buttons carry icons."""

    class IconsOnButtons(base):  # type: ignore[misc, valid-type]
        def styleHint(self, hint: QStyle.StyleHint, *args: Any) -> int:  # Override QProxyStyle.styleHint.
            if hint == QStyle.StyleHint.SH_DialogButtonBox_ButtonsHaveIcons:
                return 1
            return super().styleHint(hint, *args)

    return IconsOnButtons(QStyleFactory.create("Fusion"))


def button_icon_names(style: QStyle, qtbot) -> list[str]:
    box = QDialogButtonBox(OK_CANCEL)
    box.setStyle(style)
    message = QMessageBox(QMessageBox.Icon.Question, "Kestrel", "Delete it?",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
    message.setStyle(style)
    for widget in (box, message):
        qtbot.addWidget(widget)
    buttons = box.buttons() + message.buttons()
    # A box made under the style: standard buttons ask it for their icons when created.
    made = QDialogButtonBox()
    made.setStyle(style)
    qtbot.addWidget(made)
    made.setStandardButtons(OK_CANCEL)
    buttons += made.buttons()
    return [button.icon().name() or "(stock)" for button in buttons if not button.icon().isNull()]


def test_dialog_buttons_carry_the_apps_icons_where_the_platform_shows_icons(qtbot) -> None:
    stock = button_icon_names(icons_on_buttons(QProxyStyle), qtbot)
    assert stock and not any(name.startswith(NAME_PREFIX) for name in stock)  # what Qt would show
    names = button_icon_names(icons_on_buttons(AppStyle), qtbot)
    assert names and all(name.startswith(NAME_PREFIX) for name in names), names


def test_every_stock_icon_a_dialog_or_close_glyph_asks_for_is_the_apps(qtbot) -> None:
    style = AppStyle(QStyleFactory.create("Fusion"))
    for pixmap in (SP.SP_DialogOkButton, SP.SP_DialogCancelButton, SP.SP_DialogYesButton, SP.SP_DialogNoButton,
                   SP.SP_DialogSaveButton, SP.SP_DialogCloseButton, SP.SP_MessageBoxQuestion,
                   SP.SP_MessageBoxCritical, SP.SP_MessageBoxWarning, SP.SP_MessageBoxInformation,
                   SP.SP_LineEditClearButton, SP.SP_TabCloseButton, SP.SP_TitleBarCloseButton):
        assert pixmap in STANDARD_ICONS
        assert style.standardIcon(pixmap).name().startswith(NAME_PREFIX), pixmap


def test_a_close_glyph_follows_the_palette_after_it_was_handed_out(qtbot) -> None:
    app = QApplication.instance()
    kept = app.palette()
    glyph = palette_icon("close", QPalette.ColorRole.ButtonText)
    try:
        for dark in (False, True):
            app.setPalette(build_palette(dark))
            image = glyph.pixmap(QSize(32, 32)).toImage()
            inked = [image.pixelColor(x, y) for x in range(32) for y in range(32) if image.pixelColor(x, y).alpha() > 200]
            assert inked, "the X was drawn"
            expected = build_palette(dark).color(QPalette.ColorRole.ButtonText)
            assert all(abs(color.lightness() - expected.lightness()) < 40 for color in inked), dark
    finally:
        app.setPalette(kept)


def test_a_search_fields_clear_button_is_readable_on_the_dark_theme(qtbot) -> None:
    app = QApplication.instance()
    kept, kept_style = app.palette(), app.style().name()
    app.setStyle(AppStyle(QStyleFactory.create("Fusion")))
    try:
        app.setPalette(build_palette(True))
        edit = QLineEdit("kestrel")
        edit.setClearButtonEnabled(True)
        qtbot.addWidget(edit)
        edit.show()
        clear = edit.findChildren(QAction, "_q_qlineeditclearaction")
        assert clear and clear[0].icon().name() == NAME_PREFIX + "close"
        image = clear[0].icon().pixmap(QSize(32, 32)).toImage()
        inked = [image.pixelColor(x, y) for x in range(32) for y in range(32) if image.pixelColor(x, y).alpha() > 200]
        base = QColor(build_palette(True).color(QPalette.ColorRole.Base))
        assert inked and min(color.lightness() for color in inked) > base.lightness() + 80
    finally:
        app.setPalette(kept)
        app.setStyle(QStyleFactory.create(kept_style))


# --- on screen -----------------------------------------------------------------------------------


SCREEN = QRect(0, 0, 1920, 1040)


def test_a_dialog_is_centred_over_its_parent() -> None:
    parent = QRect(100, 100, 1000, 800)
    at = placed_at(QSize(400, 300), QMargins(1, 31, 1, 1), parent, SCREEN)
    assert at == QPoint(parent.center().x() - 201, parent.center().y() - 166)


@pytest.mark.parametrize("parent", [QRect(-3000, -2000, 1000, 800), QRect(1800, 900, 1000, 800),
                                    QRect(-500, -20, 1000, 800), None])
def test_a_dialog_is_kept_on_screen_with_its_title_bar(parent) -> None:
    at = placed_at(QSize(600, 500), QMargins(1, 31, 1, 1), parent, SCREEN)
    outer = QRect(at, QSize(602, 532))
    assert SCREEN.contains(outer), outer


def test_a_dialog_larger_than_the_screen_shows_its_title_bar() -> None:
    at = placed_at(QSize(2400, 1400), QMargins(1, 31, 1, 1), QRect(0, 0, 800, 600), SCREEN)
    assert at == QPoint(0, 0)


def test_dialogs_the_window_opens_land_on_its_screen_even_from_a_window_off_it(qtbot) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    DialogLook(window).watch(window)
    window.resize(900, 700)
    window.move(-4000, -3000)
    window.show()
    dialog = QDialog(window)
    dialog.resize(500, 400)
    question = QMessageBox(QMessageBox.Icon.Question, "Kestrel", "Delete it?", QMessageBox.StandardButton.Yes,
                           dialog)  # a dialog's own dialog too
    available = QGuiApplication.primaryScreen().availableGeometry()
    for shown in (dialog, question):
        shown.show()
        qtbot.waitExposed(shown)
        assert available.contains(shown.frameGeometry()), (shown, shown.frameGeometry(), available)
        shown.hide()
    window.move(available.topLeft() + QPoint(50, 40))
    dialog.setProperty("kestrelPlaced", None)
    dialog.show()
    assert abs(dialog.frameGeometry().center().x() - window.frameGeometry().center().x()) <= 2
    dialog.hide()
    # Where it was left last time is now off every screen (a monitor unplugged): Qt keeps a
    # moved dialog where it was; it comes back.
    dialog.move(-3000, -2500)
    dialog.show()
    assert available.contains(dialog.frameGeometry()), dialog.frameGeometry()


# --- the title bar --------------------------------------------------------------------------------


class FakeDwmapi:
    """Records DwmSetWindowAttribute calls; answers each attribute as told (0 is S_OK)."""

    def __init__(self, answers: dict[int, int]) -> None:
        self.answers = answers
        self.calls: list[tuple[int, int, int, int]] = []

    def DwmSetWindowAttribute(self, handle: Any, attribute: Any, value: Any, size: int) -> int:  # noqa: N802
        number = attribute.value
        self.calls.append((handle.value, number, ctypes.cast(value, ctypes.POINTER(ctypes.c_int)).contents.value,
                           size))
        return self.answers.get(number, -2147024809)  # E_INVALIDARG


def test_windows_is_asked_for_the_immersive_dark_title_bar(qtbot) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    dwmapi = FakeDwmapi({20: 0})
    assert use_dark_title_bar(window, True, platform="win32", dwmapi=dwmapi)
    assert dwmapi.calls == [(int(window.winId()), 20, 1, 4)]
    assert use_dark_title_bar(window, False, platform="win32", dwmapi=dwmapi)
    assert dwmapi.calls[-1] == (int(window.winId()), 20, 0, 4)


def test_an_older_windows_is_asked_with_attribute_19(qtbot) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    dwmapi = FakeDwmapi({19: 0})
    assert use_dark_title_bar(window, True, platform="win32", dwmapi=dwmapi)
    assert [call[1] for call in dwmapi.calls] == [20, 19]
    refusing = FakeDwmapi({})
    assert not use_dark_title_bar(window, True, platform="win32", dwmapi=refusing)


def test_elsewhere_the_title_bar_is_the_window_managers(qtbot) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    dwmapi = FakeDwmapi({20: 0})
    assert not use_dark_title_bar(window, True, platform="linux", dwmapi=dwmapi)
    assert not use_dark_title_bar(window, True, platform="darwin", dwmapi=dwmapi)
    assert dwmapi.calls == []


# --- locale and file dialogs ----------------------------------------------------------------------


def test_qts_default_locale_is_the_users() -> None:
    use_system_locale()
    system = QLocale.system()
    expected = "en_US" if system.language() == QLocale.Language.C else system.name()
    assert QLocale().name() == expected


def test_a_german_desktop_gets_german_dates() -> None:
    code = ("import os; os.environ['QT_QPA_PLATFORM']='offscreen'\n"
            "from PySide6.QtCore import QLocale, QDate\nfrom PySide6.QtWidgets import QApplication\n"
            "app = QApplication([])\nfrom app.ui.app import use_system_locale\nuse_system_locale()\n"
            "print(QLocale().name(), QLocale().toString(QDate(2026, 12, 1), QLocale.FormatType.ShortFormat))")
    env = {key: value for key, value in os.environ.items() if not key.startswith("LC_")}
    env["LANG"] = "de_DE.UTF-8"
    shown = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=60)
    assert shown.stdout.split() == ["de_DE", "01.12.26"], shown.stderr


def test_file_dialogs_are_the_platforms_own() -> None:
    """Qt's own dialog only where the platform has none: app code never asks for it."""
    users = [path for path in (ROOT / "app").rglob("*.py") if "DontUseNativeDialog" in path.read_text("utf-8")]
    assert users == []
