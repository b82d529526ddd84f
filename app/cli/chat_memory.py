"""`kestrel chat --no-memory`, and what memory a one-shot chat has: the person's memories, and the remember tool only where someone can approve it."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from app.cli.chat_tools import names
from app.core.memory_settings import MemoryProposal, MemorySettings
from app.service.chats.memory.remember_tool import REMEMBER


def add_memory_flag(chat: argparse.ArgumentParser) -> None:
    chat.add_argument("--no-memory", dest="memory", action="store_false",
                      help="answer without the facts Kestrel remembers about you (see `kestrel memory list`)")


def chat_memory(saved: MemorySettings, args: argparse.Namespace) -> MemorySettings:
    """The memory settings of this chat: off with --no-memory (or in the settings). The model is offered its
    remember tool only when the call can be approved: on a terminal (not a message read from standard input),
    or with --allow-tools remember; elsewhere every call would be refused, and a small model offered a
    tool it cannot use answers worse."""
    enabled = saved.enabled and args.memory
    can_ask = args.prompt != "-" and sys.stdin is not None and sys.stdin.isatty()
    allowed = REMEMBER in names(args.allow_tools) or f"kestrel/{REMEMBER}" in names(args.allow_tools)
    propose = saved.propose if (can_ask or allowed) else MemoryProposal.OFF
    return dataclasses.replace(saved, enabled=enabled, propose=propose)
