"""The real window on its chat and attach doors: files read by the real reader worker off
the UI thread, sent with the message, a source opened."""

from __future__ import annotations

from app.core.attachments import AttachedFile, SourceRef
from app.service.chats.answering import Answering
from app.ui.chat.attachment_chips import ChipState
from app.ui.messages.source_popup import SourcePopup
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, until


def _record_sends(monkeypatch) -> list[tuple[str, tuple[AttachedFile, ...]]]:
    """What the window sends through the chat door's send(text, attachments, images) (Answering's own),
    which then runs."""
    sent: list[tuple[str, tuple[AttachedFile, ...]]] = []
    plain_send = Answering.send

    def send(self, text, attachments=(), images=()):
        sent.append((text, tuple(attachments)))
        return plain_send(self, text, attachments, images)

    monkeypatch.setattr(Answering, "send", send)
    return sent


def test_a_file_is_read_by_the_reader_and_sent_with_the_message(make_window, loop, monkeypatch, tmp_path) -> None:
    sent = _record_sends(monkeypatch)
    window = make_window(engine=ScriptedEngine())
    composer = window.composer
    assert composer.attach_button.isVisible() and composer.documents_button.isVisible()
    notes = tmp_path / "notes.md"
    notes.write_text("# Plan\n\nCall Bob on Monday.\n", encoding="utf-8")
    folder = tmp_path / "a folder"
    folder.mkdir()
    window.attachments.attach([notes, folder])
    assert [chip.state for chip in composer.tray.chips] == [ChipState.READING, ChipState.READING]
    run(loop, until(lambda: not composer.tray.reading(), 60, "the reader"))
    good, bad = composer.tray.chips
    assert good.state == ChipState.READY and good.label.text().startswith("notes.md · ")
    assert bad.state == ChipState.REFUSED and "It is a folder" in bad.label.text()
    composer.edit.setPlainText("When do I call Bob?")
    composer.button.click()
    assert [(text, [file.name for file in files]) for text, files in sent] == [("When do I call Bob?", ["notes.md"])]
    assert "Call Bob on Monday." in sent[0][1][0].text
    assert composer.tray.chips == [] and composer.edit.toPlainText() == ""
    run(loop, until(idle(window), 30, "the answer"))
    window.messages.sourceChosen.emit(SourceRef(1, str(notes), None, "Plan", "Call Bob on Monday."))
    popup = window.findChild(SourcePopup)
    assert popup is not None and popup.isVisible() and popup.open_button.isEnabled()
    popup.close()
