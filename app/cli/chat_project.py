"""`kestrel chat --project NAME`: the project's model, tools, collections, memory choice and instructions, with the flags given winning."""

from __future__ import annotations

import argparse

from app.core.paths import data_paths
from app.core.projects import Project
from app.library.models import ModelLibrary
from app.library.servers.book import ServerBook


def add_project_flag(chat: argparse.ArgumentParser) -> None:
    chat.add_argument("--project", metavar="NAME",
                      help="chat in this project (`kestrel projects list`): the chat is saved in it and starts with "
                           "its instructions, model, tools, collections and memory choice (the flags given win)")


def with_project(args: argparse.Namespace, project: Project) -> argparse.Namespace:
    """The chat's flags with the project's choices where a flag was not given: --model, --tools, --docs; memory
    stays off when the project does without it. The chat is saved (in the project)."""
    return argparse.Namespace(**{
        **vars(args),
        "model": args.model if args.model is not None else project.model,
        "tools": args.tools if args.tools is not None else (",".join(project.tools) or None),
        "docs": args.docs or list(project.collections),
        "memory": args.memory and project.memory,
        "save": True,
    })


def project_system(project: Project, given: str | None, model_own: str | None) -> str:
    """The chat's system prompt: the project's instructions, then --system's text; the model's own system prompt
    only when the project has no instructions and --system was not given."""
    parts = [text for text in (project.instructions, given) if text]
    return "\n\n".join(parts) if parts else model_own or ""


def missing_model_words(project: Project) -> str | None:
    """What to say when the project's model is no longer installed (None: it is, or the project has none)."""
    if project.model is None:
        return None
    paths = data_paths()
    if ModelLibrary(paths.models).find(project.model) or ServerBook.at(paths).chat_model(project.model):
        return None
    return (f"Project \"{project.name}\" answers with the model {project.model}, which is not installed now. Give "
            f"--model, or choose another for the project: kestrel projects edit \"{project.name}\" --model MODEL "
            "(or --default-model).")
