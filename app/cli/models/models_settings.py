"""`models default` and `models set`: the model used when none is named, and each model's own settings."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from app.cli.user_error import EXIT_MODEL, EXIT_OK, EXIT_USAGE, UserError
from app.cli.models.models_common import load_settings, open_library
from app.cli.terminal_text import shown_path
from app.core.settings import SettingsError
from app.library.model_defaults import FIELD_HELP, ModelDefaults, field_names, parse_value
from app.library.installed import InstalledModel
from app.library.model_files.model_purpose import not_for_chat
from app.library.models import ModelLibrary
from app.library.projector import checked_projector

_TEXT_FIELDS = ("system_prompt", "chat_template")


def add_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser], run: Any) -> None:
    default = actions.add_parser("default", help="choose the model used when none is named, or show it")
    default.add_argument("model", metavar="ID", nargs="?", help="an installed model's id (see models list)")
    default.set_defaults(run=run, handler=_default)
    names = ", ".join(field_names())
    change = actions.add_parser(
        "set", help="change a model's own settings (its context length, GPU layers, sampling…) "
                    "or its vision projector",
        description=f"Settings: {names}. A chat's own settings go over these, and these over the app's. "
                    "KEY=@FILE reads system_prompt or chat_template from a file.")
    change.add_argument("model", metavar="ID", help="an installed model's id (see models list)")
    change.add_argument("values", metavar="KEY=VALUE", nargs="*", help=f"one of: {names}")
    change.add_argument("--clear", metavar="KEY", action="append", default=[],
                        help="go back to the app's setting for KEY (may be given more than once)")
    change.add_argument("--projector", metavar="PATH|none",
                        help="pair the model with this vision projector (an mmproj .gguf file, in the "
                             "model's folder for a model Kestrel keeps), so it can read images; none "
                             "unpairs it")
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
    if not args.values and not args.clear and args.projector is None:
        raise UserError(f"Name a setting to change, e.g. kestrel models set {model.id} "
                        f"context_length=8192; the settings are: {', '.join(field_names())}; "
                        "or pair a vision projector with --projector PATH (--projector none unpairs it).",
                        EXIT_USAGE)
    changes = {**{key: None for key in map(_known_key, args.clear)},
               **dict(_parsed(text) for text in args.values)}
    projector = _projector_argument(model, args.projector)  # checked before anything is saved
    try:
        saved = library.set_defaults(model.id, dataclasses.replace(model.defaults, **changes)) \
            if changes else model
        if args.projector is not None:
            saved = library.set_projector(model.id, projector)
    except ValueError as exc:
        raise UserError(f"{exc} Nothing was changed.", EXIT_USAGE) from None
    except LookupError as exc:
        raise UserError(str(exc), EXIT_MODEL) from None
    if changes:
        shown = describe_defaults(saved.defaults)
        print(f"{saved.id}: {shown}" if shown else f"{saved.id} uses the app's settings for everything.")
    if args.projector is not None:
        print(f"{saved.id} reads images with the vision projector {shown_path(saved.projector)}." if saved.projector
              else f"{saved.id} has no vision projector now: it reads text only.")
    return EXIT_OK


def _projector_argument(model: InstalledModel, given: str | None) -> Path | None:
    """The projector --projector names (None for none, or when not given), once it is known
    to fit the model: the library's words otherwise."""
    if given is None or given.strip().lower() == "none":
        return None
    path = Path(given).expanduser().absolute()
    if not path.is_file():
        raise UserError(f'--projector must be a vision projector file (an mmproj .gguf) or none (you gave '
                        f'"{shown_path(path)}", and there is no file there). Nothing was changed.', EXIT_USAGE)
    try:
        return checked_projector(model, path)
    except ValueError as exc:
        raise UserError(f"{exc} Nothing was changed.", EXIT_USAGE) from None


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
