"""The user's settings and the file they live in, written atomically."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from app.core.files import write_atomically
from app.core.generation import GenerationSettings
from app.core.memory_settings import MemorySettings
from app.core.quick_ask_settings import QuickAskSettings
from app.core.voice_settings import VoiceSettings
from app.core.server_settings import ServerSettings

# Raise when the meaning of a key changes; adding a key does not need a new version,
# because unknown keys are ignored and missing keys take their defaults.
SETTINGS_VERSION = 1
THEMES = ("system", "light", "dark")
# The engine while the window is hidden, and while another app has the focus (the
# policy is app/service/models/background.py): paused, gently, or at full speed.
WHEN_HIDDEN = ("pause", "gently", "full")
WHEN_IN_BACKGROUND = ("full", "gently")


class DevicePreference(StrEnum):
    """Where the user wants models to run; placement (app/hardware/placement.py) says what
    that means on this machine. The values are written to settings.json and model.json."""

    AUTO = "auto"
    NPU = "npu"
    GPU = "gpu"
    CPU = "cpu"


class PromptLookupMode(StrEnum):
    """Drafting the next tokens from the prompt (app/engine/backends/llama/prompt_lookup.py): on while it
    pays, always, or never. The values are written to settings.json and model.json."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


_Choice = TypeVar("_Choice", bound=StrEnum)


class SettingsError(Exception):
    """The settings file cannot be written; the message says what to do."""


@dataclass(frozen=True)
class Settings:
    """Everything the user can set that is not part of one conversation.

    `threads` None lets each answer use the physical cores other programs leave free
    (app/service/models/threads.py). `theme` is one of THEMES.
    """

    version: int = SETTINGS_VERSION
    default_model: str | None = None
    generation: GenerationSettings = GenerationSettings()
    threads: int | None = None
    device_preference: DevicePreference = DevicePreference.AUTO
    theme: str = "system"
    # What the engine does while the window is hidden (minimized), and while another app
    # has the focus: one of WHEN_HIDDEN / WHEN_IN_BACKGROUND.
    when_hidden: str = "pause"
    when_in_background: str = "full"
    # Minutes without an answer before the model is unloaded to give its memory back
    # (None: never); and whether the engine process ends then too.
    unload_after_minutes: float | None = 15.0
    exit_engine_when_idle: bool = False
    # Running gently also halves the engine's threads for the next answer.
    gentle_fewer_threads: bool = False
    # Disk for saved chat states (the KV cache of recent chats) in the cache folder, in
    # MiB; 0 keeps none on disk. And prompt-lookup drafting.
    saved_states_mb: int = 2048
    prompt_lookup: PromptLookupMode = PromptLookupMode.AUTO
    # Tool use (app/tools): rounds of tool calls one answer may make, and the longest tool
    # result given to the model (longer ones are cut, with a note).
    tool_rounds: int = 8
    tool_result_chars: int = 64_000
    # The local API server (app/server): off until the user turns it on.
    server: ServerSettings = ServerSettings()
    # The embedding model (a library model id) whose vectors document search uses; None:
    # the only one installed (the oldest when there are several).
    embedding_model: str | None = None
    # Quick ask (app/ui/quick_ask): the global shortcut and what its window keeps.
    quick_ask: QuickAskSettings = QuickAskSettings()
    # Kestrel starts (in the tray) when the user signs in: app/core/autostart.py writes
    # the entry. And whether "Kestrel keeps running in the tray" was said once already.
    start_at_sign_in: bool = False
    told_about_tray: bool = False
    # The decode speed, in tokens/s, at which an answer reads comfortably: a model predicted to
    # reach it here "runs well", and the recommendation picks the best model that does
    # (app/hardware/speed.py). 10 is a little above reading speed (about 4 words/s, 1.3 tokens each).
    comfortable_tokens_per_s: float = 10.0
    # Code blocks in answers: long lines wrap inside the block (True), or the block keeps its
    # lines and scrolls sideways (False). View → Wrap long code lines.
    wrap_code: bool = True
    # Memory (app/core/memories.py): whether chats use the person's memories, how new ones are
    # proposed, and whether the API server uses them (off: other programs are not the person).
    memory: MemorySettings = MemorySettings()
    # Voice (app/service/voice): what dictation does with its words, when it stops, its microphone.
    voice: VoiceSettings = VoiceSettings()

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict that `json.dumps` can write."""
        data = dataclasses.asdict(self)
        data["server"] = self.server.to_dict()
        data["quick_ask"] = self.quick_ask.to_dict()
        data["memory"] = self.memory.to_dict()
        data["voice"] = self.voice.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], problems: list[str] | None = None) -> Settings:
        """Settings from a dict read from disk; see `settings_from_dict`."""
        return settings_from_dict(data, [] if problems is None else problems)

    def validated(self) -> Settings:
        """These settings, or ValueError in plain words naming the bad one."""
        model = self.default_model
        if model is not None and not isinstance(model, str):
            raise ValueError(f"default_model must be a model name or empty (got {model!r}).")
        embedding = self.embedding_model
        if embedding is not None and (not isinstance(embedding, str) or not embedding.strip()):
            raise ValueError(f"embedding_model must be an embedding model's name or empty (got {embedding!r}).")
        threads = self.threads
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise ValueError(
                f"threads must be a whole number of 1 or more, or empty for one per core "
                f"(got {threads!r})."
            )
        device = choice(DevicePreference, self.device_preference)
        if device is None:
            raise ValueError(
                f"device_preference must be one of {', '.join(DevicePreference)} "
                f"(got {self.device_preference!r})."
            )
        if self.theme not in THEMES:
            raise ValueError(f"theme must be one of {', '.join(THEMES)} (got {self.theme!r}).")
        if self.when_hidden not in WHEN_HIDDEN:
            raise ValueError(f"when_hidden must be one of {', '.join(WHEN_HIDDEN)} (got {self.when_hidden!r}).")
        if self.when_in_background not in WHEN_IN_BACKGROUND:
            raise ValueError(f"when_in_background must be one of {', '.join(WHEN_IN_BACKGROUND)} "
                             f"(got {self.when_in_background!r}).")
        minutes = self.unload_after_minutes
        if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, (int, float))
                                    or not 0 < minutes <= 10_000):
            raise ValueError(f"unload_after_minutes must be a number of minutes above 0 and at most 10,000, "
                             f"or empty for never (got {minutes!r}).")
        if not isinstance(self.gentle_fewer_threads, bool):
            raise ValueError(f"gentle_fewer_threads must be true or false (got {self.gentle_fewer_threads!r}).")
        for name in ("start_at_sign_in", "told_about_tray", "wrap_code"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false (got {getattr(self, name)!r}).")
        if not isinstance(self.exit_engine_when_idle, bool):
            raise ValueError(f"exit_engine_when_idle must be true or false (got {self.exit_engine_when_idle!r}).")
        comfortable = self.comfortable_tokens_per_s
        if isinstance(comfortable, bool) or not isinstance(comfortable, (int, float)) or not 1 <= comfortable <= 1000:
            raise ValueError(f"comfortable_tokens_per_s must be a number of tokens per second from 1 to 1,000 "
                             f"(got {comfortable!r}).")
        states = self.saved_states_mb
        if isinstance(states, bool) or not isinstance(states, int) or not 0 <= states <= 1_000_000:
            raise ValueError(f"saved_states_mb must be a whole number of MiB from 0 (none) to 1,000,000 "
                             f"(got {states!r}).")
        lookup = choice(PromptLookupMode, self.prompt_lookup)
        if lookup is None:
            raise ValueError(f"prompt_lookup must be one of {', '.join(PromptLookupMode)} "
                             f"(got {self.prompt_lookup!r}).")
        rounds, chars = self.tool_rounds, self.tool_result_chars
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 100:
            raise ValueError(f"tool_rounds must be a whole number from 1 to 100 (got {rounds!r}).")
        if isinstance(chars, bool) or not isinstance(chars, int) or not 1_000 <= chars <= 10_000_000:
            raise ValueError(f"tool_result_chars must be a whole number from 1,000 to 10,000,000 (got {chars!r}).")
        if not isinstance(self.generation, GenerationSettings):
            raise TypeError(f"generation must be GenerationSettings, not {self.generation!r}")
        if not isinstance(self.server, ServerSettings):
            raise TypeError(f"server must be ServerSettings, not {self.server!r}")
        if not isinstance(self.quick_ask, QuickAskSettings):
            raise TypeError(f"quick_ask must be QuickAskSettings, not {self.quick_ask!r}")
        if not isinstance(self.memory, MemorySettings):
            raise TypeError(f"memory must be MemorySettings, not {self.memory!r}")
        if not isinstance(self.voice, VoiceSettings):
            raise TypeError(f"voice must be VoiceSettings, not {self.voice!r}")
        return dataclasses.replace(self, device_preference=device, prompt_lookup=lookup,
                                   generation=self.generation.validated(), server=self.server.validated(),
                                   quick_ask=self.quick_ask.validated(), memory=self.memory.validated(),
                                   voice=self.voice.validated())


def choice(kind: type[_Choice], value: object) -> _Choice | None:
    """value as a member of kind (text read from a file or typed counts), or None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return kind(value)
    except ValueError:
        return None


def _field_by_field(defaults: Any, data: Mapping[str, Any], problems: list[str]) -> Any:
    """`defaults` with each valid known value of `data` applied; bad ones noted."""
    names = {f.name for f in dataclasses.fields(defaults)}
    result = defaults
    for key, value in data.items():
        if key not in names or key in ("version", "generation", "server", "quick_ask", "memory", "voice"):
            continue
        if isinstance(value, list):  # JSON's lists are the settings' tuples
            value = tuple(value)
        try:
            result = dataclasses.replace(result, **{key: value}).validated()
        except ValueError:
            problems.append(key)
    return result


def settings_from_dict(data: Mapping[str, Any], problems: list[str]) -> Settings:
    """Settings from a dict read from disk, keeping every value that is valid.

    Unknown keys are ignored; a missing or invalid value takes its default and its
    name is added to `problems`.
    """
    generation = GenerationSettings()
    raw_generation = data.get("generation", {})
    if isinstance(raw_generation, Mapping):
        generation = _field_by_field(generation, raw_generation, problems)
    else:
        problems.append("generation")
    groups: dict[str, Any] = {}
    for name, group in (("server", ServerSettings), ("quick_ask", QuickAskSettings), ("memory", MemorySettings),
                        ("voice", VoiceSettings)):
        raw = data.get(name, {})
        if isinstance(raw, Mapping):
            groups[name] = group.from_dict(raw, problems)
        else:
            groups[name] = group()
            problems.append(name)
    base = Settings(generation=generation, **groups)
    return _field_by_field(base, data, problems)


class SettingsFile:
    """The settings file at `path`: load forgives, save is atomic.

    After `load()`, `last_problem` holds a message for the user if the file could not
    be used as it was, else None.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.last_problem: str | None = None
        # Set when the file on disk came from a newer Kestrel (see save()).
        self._newer_loaded: Settings | None = None

    def load(self) -> Settings:
        """The saved settings, or the defaults if there is no usable file."""
        self.last_problem = None
        self._newer_loaded = None
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return Settings()
        except OSError as error:
            self.last_problem = (
                f"Kestrel could not read its settings file {self.path} ({error.strerror}), "
                "so it is using default settings. Check the file's permissions."
            )
            return Settings()
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        # JSONDecodeError and UnicodeDecodeError are ValueErrors; JSON nested thousands deep
        # makes the parser raise RecursionError.
        except (ValueError, RecursionError):
            return self._set_aside()
        return self._from_data(data)

    def _from_data(self, data: dict[str, Any]) -> Settings:
        problems: list[str] = []
        settings = settings_from_dict(data, problems)
        if problems:
            self.last_problem = (
                f"Some settings in {self.path} were not valid and were reset to their "
                f"defaults: {', '.join(problems)}. Check them in the window's File → Settings…"
            )
        version = data.get("version", SETTINGS_VERSION)
        if isinstance(version, int) and not isinstance(version, bool) and version > SETTINGS_VERSION:
            self._newer_loaded = settings
            self.last_problem = (
                f"Kestrel's settings file {self.path} comes from a newer version of Kestrel. "
                "This version uses the settings it understands and leaves the file as it is, "
                "so changes made here last until Kestrel closes. Update Kestrel to keep them."
            )
        return settings

    def _set_aside(self) -> Settings:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.bad-{stamp}")
        counter = 1
        while aside.exists():
            counter += 1
            aside = self.path.with_name(f"{self.path.name}.bad-{stamp}-{counter}")
        try:
            os.replace(self.path, aside)
        except OSError as error:
            self.last_problem = (
                f"Kestrel's settings file {self.path} is damaged and could not be moved "
                f"aside ({error.strerror}), so it is using default settings. Delete the "
                "file to start afresh."
            )
            return Settings()
        self.last_problem = (
            f"Kestrel's settings file was damaged, so it is using default settings. The "
            f"old file was kept as {aside.name} in {aside.parent}."
        )
        return Settings()

    def save(self, settings: Settings) -> None:
        """Write the settings so that the file is always either old or new, never torn.

        ValueError if `settings` are invalid (a bug in the caller); SettingsError if
        the disk refuses.
        """
        settings = dataclasses.replace(settings.validated(), version=SETTINGS_VERSION)
        # A file from a newer Kestrel may hold settings this version does not know, and
        # may mean something else by the ones it does: it is never written over.
        if self._newer_loaded is not None:
            if settings == self._newer_loaded:
                return
            raise SettingsError(
                f"This change was not saved: Kestrel's settings file {self.path} comes from a "
                "newer version of Kestrel, and this version leaves it as it is. The change lasts "
                "until Kestrel closes."
            )
        text = json.dumps(settings.to_dict(), indent=2, sort_keys=True) + "\n"
        try:
            write_atomically(self.path, text.encode("utf-8"))
        except OSError as error:
            raise SettingsError(
                f"Kestrel could not save its settings to {self.path} ({error.strerror}). "
                "Check that the disk has free space and the folder is writable, then "
                "change the setting again."
            ) from error
