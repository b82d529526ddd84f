"""`models default` and `models set`: the model used when none is named, and each model's own settings."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from app.cli.user_error import EXIT_MODEL, EXIT_OK, EXIT_USAGE, UserError
from app.cli.models_common import load_settings, open_library
from app.core.settings import SettingsError
from app.library.model_defaults import FIELD_HELP, ModelDefaults, field_names, parse_value
from app.library.installed import InstalledModel
from app.library.model_purpose import not_for_chat
from app.library.models import ModelLibrary

_TEXT_FIELDS = ("system_prompt", "chat_template")


def add_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser], run: Any) -> None:
    default = actions.add_parser("default", help="choose the model used when none is named, or show it")
    default.add_argument("model", metavar="ID", nargs="?", help="an installed model's id (see models list)")
    default.set_defaults(run=run, handler=_default)
    names = ", ".join(field_names())
    change = actions.add_parser(
        "set", help="change a model's own settings (its context length, GPU layers, sampling…)",
        description=f"Settings: {names}. A chat's own settings go over these, and these over the app's. "
                    "KEY=@FILE reads system_prompt or chat_template from a file.")
    change.add_argument("model", metavar="ID", help="an installed model's id (see models list)")
    change.add_argument("values", metavar="KEY=VALUE", nargs="*", help=f"one of: {names}")
    change.add_argument("--clear", metavar="KEY", action="append", default=[],
                        help="go back to the app's setting for KEY (may be given more than once)")
    change.set_defaults(run=run, handler=_set)


def _default(args: argparse.Namespace) -> int:
    library = open_library()
    settings_file, settings = load_settings()
    if args.model is None:
        current = library.default(settings.default_model)
        if current is None:
            print("No chat model is installed, so there is no default. Add one with: kestrel models add PATH")
        elif settings.default_model and current.id == settings.default_model:
            print(f"{current.id} (chosen)")
        else:
            print(f"{current.id} (the oldest installed; choose one with: kestrel models default ID)")
        return EXIT_OK
    model = _installed(library, args.model)
    refusal = not_for_chat(model.id, model.purpose)
    if refusal:
        raise UserError(refusal.replace(" Choose a chat model instead", " For documents it is chosen with "
                                        f"kestrel docs model {model.id}; choose a chat model as the default", 1),
                        EXIT_MODEL)
    if model.missing:
        raise UserError(f"{model.id} cannot be the default: its file is not at {model.path} now. Put "
                        "it back (or plug in its drive), then try again.", EXIT_MODEL)
    try:
        settings_file.save(dataclasses.replace(settings, default_model=model.id))
    except SettingsError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    print(f'{model.id} ("{model.title}") is now the model used when none is named.')
    return EXIT_OK


def _set(args: argparse.Namespace) -> int:
    library = open_library()
    model = _installed(library, args.model)
    if not args.values and not args.clear:
        raise UserError(f"Name a setting to change, e.g. kestrel models set {model.id} "
                        f"context_length=8192; the settings are: {', '.join(field_names())}.", EXIT_USAGE)
    changes = {**{key: None for key in map(_known_key, args.clear)},
               **dict(_parsed(text) for text in args.values)}
    try:
        saved = library.set_defaults(model.id, dataclasses.replace(model.defaults, **changes))
    except ValueError as exc:
        raise UserError(f"{exc} Nothing was changed.", EXIT_USAGE) from None
    except LookupError as exc:
        raise UserError(str(exc), EXIT_MODEL) from None
    shown = describe_defaults(saved.defaults)
    print(f"{saved.id}: {shown}" if shown else f"{saved.id} uses the app's settings for everything.")
    return EXIT_OK


def describe_defaults(defaults: ModelDefaults) -> str:
    """A model's own settings on one line ("" for none); long texts are cut short."""
    def shown(value: Any) -> str:
        if isinstance(value, str):
            flat = value.replace("\n", " ")
            return repr(flat if len(flat) <= 40 else flat[:39] + "…")
        if isinstance(value, tuple):  # tools: server names
            return ",".join(value) or "-"
        return str(value)

    return ", ".join(f"{key}={shown(value)}" for key, value in defaults.to_dict().items())


def _parsed(text: str) -> tuple[str, Any]:
    key, equals, value = text.partition("=")
    key = key.strip()
    if not equals:
        raise UserError(f'"{text}" is not KEY=VALUE: write it as, e.g., temperature=0.4 (or use '
                        f"--clear {key} to go back to the app's setting).", EXIT_USAGE)
    _known_key(key)
    if key in _TEXT_FIELDS and value.startswith("@"):
        value = _read_text(key, Path(value[1:]).expanduser())
    try:
        return key, parse_value(key, value)
    except ValueError as exc:
        raise UserError(f"{exc} Nothing was changed.", EXIT_USAGE) from None


def _known_key(key: str) -> str:
    if key not in field_names():
        raise UserError(f'"{key}" is not a model setting. The settings are: '
                        + "; ".join(f"{name} ({FIELD_HELP[name]})" for name in field_names()) + ".",
                        EXIT_USAGE)
    return key


def _read_text(key: str, path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"Could not read {key} from {path}: {reason}. Nothing was changed.",
                        EXIT_USAGE) from None


def _installed(library: ModelLibrary, given: str) -> InstalledModel:
    found = library.find(given)
    if found is None:
        raise UserError(f'No installed model has the id "{given}". Run kestrel models list to see '
                        "the ids.", EXIT_MODEL)
    return found
