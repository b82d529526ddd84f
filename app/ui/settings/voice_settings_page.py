"""Settings' Voice page: what dictation does with its words, when it stops listening, which microphone it opens,
which language it listens for; whether answers are read aloud as they are written, on which speaker, and how fast;
whether speaking interrupts Kestrel in voice mode."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from PySide6.QtCore import QLocale, QSize
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QLabel, QSizePolicy, QVBoxLayout,
                               QWidget)

from app.core.settings import Settings
from app.core.speech_languages import WHISPER_LANGUAGES
from app.core.voice_settings import DETECT_LANGUAGE, FASTEST_SPEED, SLOWEST_SPEED, VoiceSettings
from app.ui.common.window_look import shortcut_letter_extra

NOTE = ("Press the microphone beside Send (or Ctrl+Shift+Space) and speak: your words go in the message box. "
        "Speech is turned into text on this computer; nothing you say is saved or sent anywhere.")
DEFAULT_MICROPHONE = "The system's default"
NO_MICROPHONES = "No microphone was found. Plug one in, then open Settings again."
READ_NOTE = ("Each answer has a speaker (Ctrl+Shift+A): press it to hear the answer, press it again or Esc to stop. "
             "The voice speaks on this computer; nothing is saved or sent.")
DEFAULT_SPEAKER = "The system's default"
NO_SPEAKERS = "No speaker or headphones were found. Plug some in, then open Settings again."
DETECT_WORDS = "Any language (detected each time)"
INTERRUPT_TIP = ("Voice mode (Ctrl+Shift+T) keeps the microphone open while Kestrel speaks, and your voice stops it. "
                 "With loudspeakers the microphone may hear Kestrel itself and stop it: turn this off, or use "
                 "headphones. Off: Kestrel listens again once it has finished speaking; Esc stops it sooner.")
LANGUAGE_TIP = ("English is heard by the fastest speech model. Any other language, or detecting it, uses the "
                "multilingual model, which is slower; choosing your language is more accurate than detecting it.")
BY_LANGUAGE = "Chosen by the language (tiny.en for English, base for others)"
DEFAULT_VOICE_WORDS = "Joe (U.S. English, ships with Kestrel)"
WINDOWS_VOICE_WORDS = "Windows' voice (the one Windows' settings choose)"
SPEECH_MODEL_TIP = ("The model dictation and voice mode listen with. Bigger ones make fewer mistakes and are slower; "
                    "get them in Models → Speech. One that hears English only is passed over for other languages.")
Microphones = Callable[[], Awaitable[tuple[str, ...]]]
# (kind, id, title) of the speech models ("transcription") and voices ("voice") that are here to use.
SpeechChoices = Callable[[], Awaitable[tuple[tuple[str, str, str], ...]]]
Speakers = Callable[[], Awaitable[tuple[str, ...]]]
Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]


class VoiceSettingsPage(QWidget):
    """The voice group as controls; `value(settings)` gives settings with them. The microphone and speaker
    lists are read (on a thread, by `microphones` and `speakers`) the first time the page is shown, never when
    Settings opens elsewhere: reading them starts the sound library."""

    def __init__(self, settings: VoiceSettings, parent: QWidget | None = None, *,
                 microphones: Microphones | None = None, spawn: Spawn | None = None,
                 speakers: Speakers | None = None) -> None:
        super().__init__(parent)
        self._microphones, self._spawn, self._listed = microphones, spawn, False
        self._speakers = speakers
        self._speech_choices: SpeechChoices | None = None
        note = QLabel(NOTE, self)
        note.setWordWrap(True)
        self.send_at_once = QCheckBox("Send dictated text at &once", self)
        self.send_at_once.setChecked(settings.send_at_once)
        self.send_at_once.setToolTip("Off: the words wait in the message box for you to read, edit and send.")
        self.stop_at_end = QCheckBox("Stop &listening when I stop speaking", self)
        self.stop_at_end.setChecked(settings.stop_at_end_of_speech)
        self.stop_at_end.setToolTip("Off: Kestrel listens until you press the microphone again, through pauses.")
        self.microphone = QComboBox(self)
        self.microphone.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.microphone.addItem(DEFAULT_MICROPHONE, None)
        if settings.microphone is not None:
            self.microphone.addItem(settings.microphone, settings.microphone)
            self.microphone.setCurrentIndex(1)
        self.microphone_note = QLabel(self)
        self.microphone_note.setWordWrap(True)
        self.microphone_note.hide()
        self.language = language_box(settings.language, self)
        self.speech_model = _choice_box(BY_LANGUAGE, settings.speech_model, self)
        self.speech_model.setToolTip(SPEECH_MODEL_TIP)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Micro&phone:", self.microphone)
        form.addRow("", self.microphone_note)
        form.addRow("Lan&guage I speak:", self.language)
        form.addRow("Speech mo&del:", self.speech_model)
        layout = QVBoxLayout(self)
        layout.addWidget(note)
        layout.addSpacing(6)
        layout.addWidget(self.send_at_once)
        layout.addWidget(self.stop_at_end)
        layout.addSpacing(6)
        layout.addLayout(form)
        layout.addSpacing(12)
        reading = self._add_reading(layout, settings)
        layout.addStretch(1)
        _align_labels(form, reading)

    def _add_reading(self, layout: QVBoxLayout, settings: VoiceSettings) -> QFormLayout:
        """Read-aloud's controls: the setting that reads every answer, the speaker and the voice's speed; and
        whether voice mode's voice stops when the person speaks."""
        note = QLabel(READ_NOTE, self)
        note.setWordWrap(True)
        self.read_answers = QCheckBox("&Read answers aloud as they are written", self)
        self.read_answers.setChecked(settings.read_aloud_answers)
        self.read_answers.setToolTip("Each answer is spoken sentence by sentence while it is written, from its "
                                     "first sentence on.")
        self.speaker = QComboBox(self)
        self.speaker.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.speaker.addItem(DEFAULT_SPEAKER, None)
        if settings.speaker is not None:
            self.speaker.addItem(settings.speaker, settings.speaker)
            self.speaker.setCurrentIndex(1)
        self.speaker_note = QLabel(self)
        self.speaker_note.setWordWrap(True)
        self.speaker_note.hide()
        self.speed = QDoubleSpinBox(self)
        self.speed.setRange(SLOWEST_SPEED, FASTEST_SPEED)
        self.speed.setSingleStep(0.1)
        self.speed.setDecimals(1)
        self.speed.setSuffix("×")
        self.speed.setValue(settings.voice_speed)
        self.speed.setToolTip("1.0× is the voice's own pace; 0.5× half as fast, 2.0× twice as fast.")
        self.speed.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)  # a number, not a line
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.voice = _choice_box(_default_voice_words(), settings.voice, self)
        self.voice.setToolTip("The voice answers are read with; get more in Models → Speech (and, on Windows, in "
                              "Windows' Settings → Time & language → Speech).")
        form.addRow("Spea&ker:", self.speaker)
        form.addRow("", self.speaker_note)
        form.addRow("Voi&ce:", self.voice)
        form.addRow("Voice sp&eed:", self.speed)
        self.interrupt = QCheckBox("&Stop talking when I start to speak (voice mode)", self)
        self.interrupt.setChecked(settings.interrupt_by_speaking)
        self.interrupt.setToolTip(INTERRUPT_TIP)
        layout.addWidget(note)
        layout.addSpacing(6)
        layout.addWidget(self.read_answers)
        layout.addLayout(form)
        layout.addSpacing(6)
        layout.addWidget(self.interrupt)
        return form

    def minimumSizeHint(self) -> QSize:  # Override QWidget.minimumSizeHint: all of the page, never squeezed.
        # Settings is laid out at its pages' minimum height, which at 200% (a 1080p screen) cut this page's
        # notes and boxes in half: the page asks for the height it needs at its narrowest.
        return self.sizeHint()

    def use_speakers(self, speakers: Speakers) -> None:
        """Where the speaker list comes from (read with the microphones, when the page is first shown)."""
        self._speakers = speakers

    def use_speech_choices(self, choices: SpeechChoices) -> None:
        """Where the speech models and voices to choose from come from (read when the page is first shown)."""
        self._speech_choices = choices

    def value(self, settings: Settings) -> Settings:
        """`settings` with this page's voice settings."""
        voice = VoiceSettings(send_at_once=self.send_at_once.isChecked(),
                              stop_at_end_of_speech=self.stop_at_end.isChecked(),
                              microphone=self.microphone.currentData(),
                              read_aloud_answers=self.read_answers.isChecked(), speaker=self.speaker.currentData(),
                              voice_speed=round(self.speed.value(), 1), language=self.language.currentData(),
                              interrupt_by_speaking=self.interrupt.isChecked(),
                              speech_model=self.speech_model.currentData(), voice=self.voice.currentData())
        return dataclasses.replace(settings, voice=voice)

    def list_microphones(self) -> None:
        """Fill the microphone and speaker lists (once; called when the page is first shown)."""
        if self._listed or self._spawn is None:
            return
        self._listed = True
        if self._microphones is not None:
            self._spawn(_fill(self._microphones, self.microphone, self.microphone_note, NO_MICROPHONES))
        if self._speakers is not None:
            self._spawn(_fill(self._speakers, self.speaker, self.speaker_note, NO_SPEAKERS))
        if self._speech_choices is not None:
            self._spawn(_fill_choices(self._speech_choices, self.speech_model, self.voice))


def _choice_box(default_words: str, chosen: str | None, parent: QWidget) -> QComboBox:
    """The default first (None), then the chosen id until the list of what is here is read."""
    box = QComboBox(parent)
    box.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
    box.addItem(default_words, None)
    if chosen is not None:
        box.addItem(chosen, chosen)
        box.setCurrentIndex(1)
    return box


def _default_voice_words() -> str:
    """What the default voice is: Windows' own where Windows can speak for Kestrel, else Joe."""
    from app.voice.synthesis.voices import JOE, default_voice
    return DEFAULT_VOICE_WORDS if default_voice() is JOE else WINDOWS_VOICE_WORDS


async def _fill_choices(choices: SpeechChoices, models: QComboBox, voices: QComboBox) -> None:
    """The speech models and voices that are here, by their titles, after the default; the choice kept (a chosen
    one no longer here stays, by its id, and says so when it is used)."""
    from app.voice.synthesis.voices import default_voice  # the default's item says it already
    found = await choices()
    default = default_voice().id
    for box, kind in ((models, "transcription"), (voices, "voice")):
        for _, speech_id, title in (choice for choice in found if choice[0] == kind and choice[1] != default):
            index = box.findData(speech_id)
            if index < 0:
                box.addItem(title, speech_id)
            else:
                box.setItemText(index, title)


async def _fill(devices: Microphones | Speakers, box: QComboBox, note: QLabel, none_found: str) -> None:
    """A device list, read off the UI thread, added after the default; the choice kept."""
    names = await devices()
    chosen = box.currentData()
    for name in names:
        if box.findData(name) < 0:
            box.addItem(name, name)
    box.setCurrentIndex(max(0, box.findData(chosen)))
    note.setText(none_found)
    note.setVisible(not names)


# Whisper's codes that are not ISO 639-1's: Javanese is "jv" there.
_WHISPER_SPELLING = {"jw": "jv"}


def language_name(code: str) -> str:
    """A language's name in English for its ISO 639-1 code (Qt's table), or the code where Qt has no name."""
    language = QLocale(_WHISPER_SPELLING.get(code, code)).language()
    return code if language in (QLocale.Language.C, QLocale.Language.AnyLanguage) else QLocale.languageToString(language)


def language_box(chosen: str, parent: QWidget) -> QComboBox:
    """English first (the fast model), then "any language", then every other language Whisper knows by name."""
    box = QComboBox(parent)
    box.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
    box.setToolTip(LANGUAGE_TIP)
    box.addItem(f"{language_name('en')} (fastest)", "en")
    box.addItem(DETECT_WORDS, DETECT_LANGUAGE)
    others = sorted(((language_name(code), code) for code in WHISPER_LANGUAGES if code != "en"),
                    key=lambda pair: pair[0].casefold())
    for name, code in others:
        box.addItem(name if name != code else f"{code} (no name known)", code)
    box.setCurrentIndex(max(0, box.findData(chosen)))
    return box


def _align_labels(*forms: QFormLayout) -> None:
    """The forms' fields start at one edge: each label as wide as the widest of them all."""
    labels = [label for form in forms for row in range(form.rowCount())
              if (item := form.itemAt(row, QFormLayout.ItemRole.LabelRole)) is not None
              and isinstance(label := item.widget(), QLabel)]
    # With what its underlined shortcut letter costs (Settings adds it to a label's width, fit_shortcut_letters):
    # the fields were 1-3 px apart.
    width = max((label.sizeHint().width() + shortcut_letter_extra(label) for label in labels), default=0)
    for label in labels:
        label.setMinimumWidth(width)
