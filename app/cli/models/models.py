"""`python -m app models`: list, inspect, add, remove and download the models in Kestrel's library.

Nothing here opens a socket except `models get`, and only when the user runs it: the
downloader is imported inside that command, not with this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from app.cli.models import models_get, models_search, models_settings
from app.cli.user_error import EXIT_INTERRUPTED, EXIT_MODEL, EXIT_OK, EXIT_USAGE, UserError
from app.cli.closed_output import output_closed
from app.cli.models.models_common import EXIT_FILES, add_folder, copy_in, load_settings, open_library, reference
from app.cli.terminal_text import shown_path, terminal_line, terminal_text
from app.core.units import human_size
from app.core.settings import Settings, SettingsError, SettingsFile
from app.hardware.fit import FitEstimate, with_others_now
from app.library.model_files.gguf_info import ModelFileError
from app.library.model_defaults import ModelDefaults
from app.library.model_files.model_format import GENAI_CONFIG
from app.library.model_details import model_details
from app.library.installed import InstalledModel
from app.library.model_files.model_purpose import ModelPurpose
from app.library.models import ModelLibrary

# info's lines in plain output: the JSON key and the words before its value.
_INFO_LABELS = (
    ("title", "title"), ("path", "path"), ("format", "format"), ("architecture", "architecture"),
    ("parameters", "parameters"), ("parameters_label", "size label"), ("quantization", "quantization"), ("file_size", "file size"),
    ("layers", "layers"), ("context_length", "context length"), ("embedding_length", "embedding size"),
    ("attention_heads", "attention heads"), ("kv_heads", "key/value heads"), ("head_size", "head size"),
    ("vocab_size", "vocabulary"), ("chat_template", "chat template"), ("license", "license"),
    ("license_link", "license link"), ("decoder_file", "decoder file"), ("providers", "providers"),
    ("projector", "projector"), ("projector_missing", "projector"),
    ("source", "source"), ("sha256", "SHA-256"), ("default", "default"),
)
_ADD_ONE = ("Add one with: kestrel models add PATH (a .gguf file, an ONNX model folder, or a folder "
            "to look through for models), or "
            "download one with: kestrel models get URL.")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = commands.add_parser("models", help="list, inspect, add, remove or download models")
    actions = models.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the installed models, the default marked")
    listing.add_argument("--json", action="store_true", help="one JSON object per model and line")
    listing.set_defaults(run=run, handler=_list)
    info = actions.add_parser("info", help="what a model's file says, read without loading it")
    info.add_argument("model", metavar="ID", help="an installed model's id (see models list), or a path")
    info.add_argument("--json", action="store_true", help="the details as one JSON object")
    info.add_argument("--ctx", type=int, metavar="N",
                      help="judge how it runs here at this context length (default: the model's own, else the app's)")
    info.set_defaults(run=run, handler=_info)
    add = actions.add_parser("add", help="add a GGUF file or an ONNX Runtime GenAI folder (copied in, "
                                         "or kept where it is), or every model in a folder")
    add.add_argument("path", metavar="PATH", help="a .gguf file, an ONNX model folder, or a folder to "
                                                  "look through (its models are kept where they are)")
    add.add_argument("--reference", action="store_true",
                     help="keep the file where it is instead of copying it into the models folder")
    add.set_defaults(run=run, handler=_add)
    remove = actions.add_parser("remove", help="delete a model from the models folder, or forget one "
                                               "kept elsewhere (its file stays)")
    remove.add_argument("model", metavar="ID", help="the model's id (see models list)")
    remove.set_defaults(run=run, handler=_remove)
    models_get.add_parser(actions, run)
    models_search.add_parser(actions, run)
    models_settings.add_parser(actions, run)


def run(args: argparse.Namespace) -> int:
    """Run the chosen action; a problem the user can fix becomes its message and exit status."""
    for stream in (sys.stdout, sys.stderr):
        # A Windows console in a legacy code page must not crash on a model's title.
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    as_json = getattr(args, "json", False)
    try:
        status: int = args.handler(args)
        return status
    except UserError as exc:
        return _report(exc, as_json)
    except OSError as exc:  # the disk or a permission, where no message below covers it
        if output_closed(exc):
            raise  # the output's reader went away: no problem of the disk (app/__main__.py ends quietly)
        where = shown_path(exc.filename) if exc.filename else "its models folder"
        return _report(UserError(f"Kestrel could not use {where}: {exc.strerror or exc}. Check that "
                                 "the disk is there and has space and that you may write to it, then "
                                 "try again.", EXIT_FILES), as_json)
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


def _report(exc: UserError, as_json: bool) -> int:
    """Say what went wrong (also as a JSON line under --json) and give its exit status."""
    if as_json:
        print(json.dumps({"type": "error", "status": exc.status, "message": str(exc)}), flush=True)
    print(f"kestrel: {terminal_text(str(exc))}", file=sys.stderr, flush=True)  # names in it are anyone's text
    return exc.status


# --- list and info ---------------------------------------------------------------------

def _list(args: argparse.Namespace) -> int:
    library, settings = open_library(), load_settings()[1]
    installed = library.list()
    default = library.default(settings.default_model)
    if not installed:
        print(f"No model is installed. {_ADD_ONE}", file=sys.stderr)
        return EXIT_OK
    rows = [_listing(model, default is not None and model.id == default.id) for model in installed]
    if args.json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return EXIT_OK
    id_width = max(len(row["id"]) for row in rows)
    for row in rows:
        print(f"{row['id']:<{id_width}}  {row['format']:<4}  {human_size(row['size']):>8}  "
              f"{terminal_line(row['title'])}{_marks(row)}")
    use = library.disk_use()
    elsewhere = (f"; {human_size(use.referenced_total)} more in models kept where they are"
                 if use.referenced_total else "")
    print(f"Disk use: {human_size(use.total)} in Kestrel's models folder{elsewhere}.")
    return EXIT_OK


def _marks(row: dict[str, Any]) -> str:
    marks = [*(["default"] if row["default"] else []), *(["kept where it is"] if row["referenced"] else [])]
    if row["purpose"] != "chat":
        marks.append(f"{row['purpose']} model: not for chat")
    if row["missing"]:
        marks.append(f"missing: not at {shown_path(row['path'])} now")
    return "".join(f"  ({mark})" for mark in marks)


def _listing(model: InstalledModel, is_default: bool) -> dict[str, Any]:
    return {"id": model.id, "title": model.title, "format": model.format, "size": model.size,
            "default": is_default, "path": str(model.path), "referenced": model.referenced,
            "missing": model.missing, "files": [str(part) for part in model.files], "purpose": model.purpose.value}


def _info(args: argparse.Namespace) -> int:
    library, settings = open_library(), load_settings()[1]
    model, path = _model_or_path(library, args.model)
    try:
        details = {} if model is not None and model.missing else \
            model_details(path, *((model.projector, model.missing_projector) if model else ()))
    except ModelFileError as exc:  # ModelFolderError too
        raise UserError(exc.message, EXIT_MODEL) from None
    default = library.default(settings.default_model)
    name = details.pop("name", None)
    shown: dict[str, Any] = {"id": model.id if model else None,
                             "title": model.title if model else name or path.name,
                             "path": str(path), **details}
    if model is not None:
        shown.update(source=model.source, sha256=model.sha256, default=default == model,
                     referenced=model.referenced, missing=model.missing,
                     files=[str(part) for part in model.files] or None, defaults=model.defaults.to_dict())
    fit = _fit(path, model, details, settings, args.ctx) if details else None
    shown = {key: value for key, value in shown.items() if value is not None}
    if fit is not None:
        shown["fit"] = _fit_json(fit)
    if args.json:
        print(json.dumps(shown, ensure_ascii=False))
    else:
        print(terminal_line(str(shown.get("id") or path.name)))
        for key, label in _INFO_LABELS:
            if key in shown:
                print(f"  {label + ':':<17}{_plain(key, shown[key])}")
        if model is not None:
            _print_kept(model)
        if fit is not None:
            print(f"  {'how it runs:':<17}{fit.summary}")
            for line in fit.lines:
                print(f"  {'':<17}{line}")
    return EXIT_OK


def _fit(path: Path, model: InstalledModel | None, details: dict[str, Any], settings: Settings,
         ctx: int | None) -> FitEstimate | None:
    """How it would run here, judged as the window judges an installed model: the steady verdict by
    predicted speed (calibrated with what this machine's answers measured), with what other programs
    use now said beside it (the window also counts a model it has loaded; this command knows of none)."""
    if ctx is not None and ctx < 1:
        raise UserError(f"--ctx {ctx} is not allowed: it must be a whole number of 1 or more.", EXIT_USAGE)
    own = model.defaults if model is not None else ModelDefaults()
    context = ctx or own.context_length or settings.generation.context_length  # capped at the trained one there
    # Imported here: the runtimes' checks and the speed judge are needed by this command only.
    from app.cli.models.models_catalog import measured_here
    from app.hardware.probe import probe
    from app.service.library.speed_judge import file_fit

    report = probe()
    label = details.get("parameters_label")
    fit = file_fit(report, path, context, own.device_preference or settings.device_preference,
                   projector=model.projector if model is not None else None,
                   chat=model.purpose is ModelPurpose.CHAT if model is not None
                   else details.get("purpose", ModelPurpose.CHAT.value) == ModelPurpose.CHAT.value,
                   parameters=label if isinstance(label, str) else "",
                   comfortable=settings.comfortable_tokens_per_s, measured=measured_here())
    if fit is None or report.ram is None:
        return fit  # None: the details above already said what is wrong with the file
    return with_others_now(fit, report, report.ram.available, 0)


def _fit_json(fit: FitEstimate) -> dict[str, Any]:
    need, speed = fit.need, fit.speed
    return {"verdict": fit.verdict.value, "summary": fit.summary, "context_length": fit.context_length,
            "tokens_per_s": round(speed.tokens_per_s, 1) if speed is not None else None,
            "speed_measured": speed.measured if speed is not None else None,
            "speed_basis": speed.basis if speed is not None else None,
            "device": fit.device_kind, "device_name": fit.device_name,
            "need": {"weights": need.weights, "kv_cache": need.kv_cache, "compute": need.compute,
                     "total": need.total},
            "available": fit.available, "max_context": fit.max_context, "other_programs_now": fit.others_now,
            "lines": list(fit.lines)}


def _print_kept(model: InstalledModel) -> None:
    """info's lines on where the model is kept and the settings of its own."""
    if model.missing:
        print(f"  {'missing:':<17}yes: nothing is at {terminal_line(str(model.path))} now (an unplugged drive?); it is "
              "listed again as it was once the file is back")
    if model.referenced:
        print(f"  {'kept:':<17}where it is; removing it only makes Kestrel forget it")
    if model.files:
        print(f"  {'parts:':<17}{len(model.files)} files ({terminal_line(str(model.files[0].name))} …)")
    own = models_settings.describe_defaults(model.defaults)
    print(f"  {'own settings:':<17}{own or 'none (the app settings are used)'}")


def _plain(key: str, value: Any) -> str:
    if key == "file_size":
        return human_size(value) if value < 1000 else f"{human_size(value)} ({value:,} bytes)"
    if key == "parameters_label":
        return f"{value} (as the file labels it)"
    if key == "parameters":
        return f"{value:,} ({_count_words(value)}, counted from the tensors)"
    if key == "context_length":
        return f"{value:,} tokens (as trained)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "providers":
        return terminal_line(", ".join(value)) if value else "none named (the CPU)"
    return f"{value:,}" if isinstance(value, int) else terminal_line(str(value))


# --- add and remove --------------------------------------------------------------------

def _add(args: argparse.Namespace) -> int:
    library = open_library()
    started = time.time()
    source = Path(args.path).expanduser().absolute()  # the model remembers where it came from
    if _is_folder(source):
        return add_folder(library, source)  # a folder that cannot be looked into is said there
    model = reference(library, source) if args.reference else copy_in(library, source)
    if model.added < started:
        print(f"kestrel: {terminal_line(str(Path(args.path).name))} is already installed as {model.id}.", file=sys.stderr)
    elif model.referenced:
        print(f"kestrel: {model.id} is kept at {terminal_line(str(model.path))}; Kestrel never moves or deletes it.",
              file=sys.stderr)
    print(model.id)
    return EXIT_OK


def _is_folder(source: Path) -> bool:
    """Whether source is a folder to look through for models (not one model's own folder);
    UserError for a path too long to open, which every later look would fail on too."""
    try:
        if not stat.S_ISDIR(source.stat().st_mode):
            return False
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            return False  # missing, a loop of links: the import below says which, in words
        raise UserError(f"{shown_path(source)} is too long a path to open ({len(str(source)):,} characters). "
                        "Move the model nearer the top of the drive, then add it from there.", EXIT_MODEL) from None
    try:
        return not (source / GENAI_CONFIG).is_file()
    except OSError:
        return True  # the scan says what it cannot read inside, and why


def _remove(args: argparse.Namespace) -> int:
    library = open_library()
    model = library.find(args.model)
    if model is None:
        raise UserError(_not_installed(args.model, removing=True), EXIT_MODEL)
    settings_file, settings = load_settings()
    chosen = library.find(settings.default_model) if settings.default_model else None
    try:
        removed = library.remove(model)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise UserError(f"Could not remove {model.id}: {exc.strerror or exc}{where}. If Kestrel's "
                        "window or a chat is using the model, close it, then run the same command "
                        "again.", EXIT_FILES) from None
    if model.referenced:
        print(f'Forgot {model.id} ("{terminal_line(model.title)}"); the file stays at {terminal_line(str(model.path))}: Kestrel did not '
              f"put it there, so it does not delete it.")
    else:
        print(f'Removed {model.id} ("{terminal_line(model.title)}"); {human_size(removed.freed)} of disk space freed.')
    if removed.left:
        print(f"Left in {terminal_line(str(model.path.parent))}: {terminal_line(', '.join(removed.left))} (Kestrel did not write "
              "them, so it did not delete them).")
    if chosen is not None and chosen.id == model.id:
        _clear_default(settings_file, settings, library)
    return EXIT_OK


def _clear_default(settings_file: SettingsFile, settings: Settings, library: ModelLibrary) -> None:
    try:
        settings_file.save(dataclasses.replace(settings, default_model=None))
    except SettingsError as exc:  # the model is gone all the same; a missing default is skipped
        print(f"kestrel: {exc}", file=sys.stderr)
    following = library.default(None)
    if following is None:
        print(f"It was the default model. No model is installed now. {_ADD_ONE}")
    else:
        print(f"It was the default model; {following.id} (the oldest installed) is used now "
              "when no model is named.")


def _model_or_path(library: ModelLibrary, given: str) -> tuple[InstalledModel | None, Path]:
    """An installed model by id or path, or a model file or folder that is not installed."""
    found = library.find(given)
    if found is not None:
        return found, found.path
    if os.path.lexists(given) or "/" in given or os.sep in given or given.lower().endswith(".gguf"):
        return None, Path(given)  # reading it says what is wrong with it, if anything
    raise UserError(_not_installed(given, removing=False), EXIT_MODEL)


def _not_installed(given: str, removing: bool) -> str:
    if removing and os.path.lexists(given):
        return (f"{given} is not in Kestrel's library, so there is nothing to remove: Kestrel "
                "deletes only models it copied into its models folder. Run kestrel models list "
                "to see the ids of those.")
    what = "" if removing else ", or give the path of a model file or folder"
    return f'No installed model has the id "{given}". Run kestrel models list to see the ids{what}.'


def _count_words(count: int) -> str:
    """270,000,000 as "270M", 7,240,000,000 as "7.2B": how model sizes are spoken of."""
    for limit, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if count >= limit:
            value = count / limit
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(count)
