"""A model's own defaults (context, GPU layers, device, prompt, sampling, template), kept in its model.json."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.generation import GenerationSettings
from app.core.settings import DevicePreference, PromptLookupMode, choice

# The sampling and length fields a model's defaults share with GenerationSettings.
GENERATION_FIELDS = ("context_length", "temperature", "top_p", "top_k", "min_p", "repeat_penalty",
                     "max_tokens", "seed", "tools")
# What each field is, in words, for messages and `models set` help.
FIELD_HELP = {
    "context_length": "tokens the model holds at once (256 to 1,048,576)",
    "gpu_layers": "layers on the GPU: a number, 0 for none, -1 for all, or auto",
    "device_preference": f"where it runs: {', '.join(DevicePreference)}",
    "system_prompt": "the instructions a new chat starts with",
    "temperature": "randomness, 0 to 5",
    "top_p": "nucleus sampling, above 0 and at most 1",
    "top_k": "the most likely tokens considered, 0 for all",
    "min_p": "drop tokens less likely than this share of the likeliest one's chance, 0 to 1 (0: off)",
    "repeat_penalty": "penalty for repeating, 0.5 to 3",
    "max_tokens": "the longest answer in tokens, 1 or more",
    "seed": "a whole number; -1 for a new random one each time",
    "chat_template": "a Jinja chat template used instead of the file's",
    "prompt_lookup": "drafting from the prompt: on or off, or empty for the app's setting",
    "tools": "the MCP servers (names in mcp.json, comma-separated) whose tools a new chat offers; - for none",
}

# The values each field accepts, in plain words: "temperature must be " + ALLOWED["temperature"].
ALLOWED = {
    "context_length": "a whole number of tokens from 256 to 1,048,576",
    "gpu_layers": "a whole number of layers (0 for none, -1 for all) or auto",
    "device_preference": f"one of {', '.join(DevicePreference)}",
    "system_prompt": "text",
    "temperature": "a number from 0 to 5",
    "top_p": "a number above 0 and at most 1",
    "top_k": "a whole number, 0 or more (0 considers all tokens)",
    "min_p": "a number from 0 to 1 (0 is off)",
    "repeat_penalty": "a number from 0.5 to 3",
    "max_tokens": "a whole number, 1 or more",
    "seed": "a whole number (-1 for a new random one each time)",
    "chat_template": "a Jinja chat template (text)",
    "prompt_lookup": "on or off",
    "tools": "MCP server names from mcp.json, separated by commas (- for none)",
}


def value_problem(name: str, given: str) -> str:
    """What `models set` says of a value a field does not take: the field, what it takes,
    and what was typed, so the user sees both side by side."""
    shown = given if len(given) <= 60 else given[:59] + "…"
    return f'{name} must be {ALLOWED[name]} (you gave "{shown}").'


@dataclass(frozen=True)
class ModelDefaults:
    """A model's own defaults; None everywhere means "the app's setting".

    As read from the library, the sampling fields a person left unset hold the model's
    authors' recommendation where the catalog knows one (app/library/recommended_sampling.py):
    clearing such a field goes back to that recommendation, not to the app's setting.
    """

    context_length: int | None = None
    gpu_layers: int | None = None          # None: Auto (placement decides); 0: none; -1: all
    device_preference: DevicePreference | None = None   # None: the app's
    system_prompt: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None             # model.json written before it had min_p reads as unset
    repeat_penalty: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    chat_template: str | None = None       # a Jinja template that replaces the file's
    prompt_lookup: PromptLookupMode | None = None       # None: the app's setting; on or off force it
    tools: tuple[str, ...] | None = None               # MCP servers a new chat offers; None: the app's

    def to_dict(self) -> dict[str, Any]:
        """Only the keys that are set, for model.json."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}

    @classmethod
    def from_dict(cls, data: object, problems: list[str] | None = None) -> ModelDefaults:
        """Defaults read from disk: unknown keys are ignored (a newer Kestrel may add some),
        and a bad value is dropped, with why in problems, so one typo never loses the rest."""
        if not isinstance(data, Mapping):
            if data is not None and problems is not None:
                problems.append(f"the model's defaults are not a set of names and values (got {data!r}).")
            return cls()
        kept: dict[str, Any] = {}
        for name in _field_names():
            if data.get(name) is None:
                continue
            value: Any = tuple(data[name]) if name == "tools" and isinstance(data[name], list) else data[name]
            try:
                kept[name] = getattr(cls(**{name: value}).validated(), name)
            except ValueError as exc:
                if problems is not None:
                    problems.append(str(exc))
        return cls(**kept)

    def validated(self) -> ModelDefaults:
        """These defaults with numbers normalised, or ValueError naming the bad field."""
        sampling = {name: getattr(self, name) for name in GENERATION_FIELDS
                    if getattr(self, name) is not None}
        checked = dataclasses.replace(GenerationSettings(), **sampling).validated()
        _check_gpu_layers(self.gpu_layers)
        device = None if self.device_preference is None else choice(DevicePreference, self.device_preference)
        if self.device_preference is not None and device is None:
            raise ValueError(f"device_preference must be one of {', '.join(DevicePreference)}, or "
                             f"empty for the app's setting (got {self.device_preference!r}).")
        for name in ("system_prompt", "chat_template"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be text (got {value!r}).")
        if self.chat_template is not None and not self.chat_template.strip():
            raise ValueError("chat_template must not be empty: clear it to use the file's template.")
        lookup = None if self.prompt_lookup is None else choice(PromptLookupMode, self.prompt_lookup)
        if self.prompt_lookup is not None and lookup not in (PromptLookupMode.ON, PromptLookupMode.OFF):
            raise ValueError(f"prompt_lookup must be on or off, or empty for the app's setting "
                             f"(got {self.prompt_lookup!r}).")
        return dataclasses.replace(self, device_preference=device, prompt_lookup=lookup,
                                   **{name: getattr(checked, name) for name in sampling})

    def generation(self, base: GenerationSettings) -> GenerationSettings:
        """The model's values over base (the app's settings); a chat's own go over these."""
        mine = {name: getattr(self, name) for name in GENERATION_FIELDS
                if getattr(self, name) is not None}
        return dataclasses.replace(base, **mine)


def parse_value(name: str, text: str) -> Any:
    """A value typed by the user (`models set ID key=value`) as the field wants it, checked.

    ValueError names the field and what it accepts. "" means unset (the app's setting),
    as does "auto" for gpu_layers; but an empty system_prompt is kept, as "no prompt".
    """
    if name not in _field_names():
        raise ValueError(f'"{name}" is not a model setting; the settings are: {", ".join(_field_names())}.')
    kind = _field_types()[name]
    stripped = text.strip()
    if name == "gpu_layers" and stripped.lower() == "auto":
        return None
    if stripped == "" and name != "system_prompt":
        return None
    try:
        if name == "tools":  # "time,files"; "-" for none (empty is the app's setting)
            value: Any = () if stripped == "-" else tuple(n.strip() for n in stripped.split(",") if n.strip())
        else:
            value = text if kind is str else kind(stripped)
        return getattr(ModelDefaults(**{name: value}).validated(), name)
    except ValueError:
        raise ValueError(value_problem(name, text)) from None


def field_names() -> tuple[str, ...]:
    """The names of the settings a model can have, in the order shown."""
    return _field_names()


def _field_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(ModelDefaults))


def _field_types() -> dict[str, type]:
    floats = {"temperature", "top_p", "min_p", "repeat_penalty"}
    texts = {"device_preference", "system_prompt", "chat_template", "prompt_lookup"}
    return {name: float if name in floats else str if name in texts else int
            for name in _field_names()}


def _check_gpu_layers(value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise ValueError(f"gpu_layers must be a whole number of layers, 0 for none or -1 for all, "
                         f"or empty for Auto (got {value!r}).")
