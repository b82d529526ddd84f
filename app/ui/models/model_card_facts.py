"""What a model card shows, worked out from a library or catalog row: its facts, fit badge, tags and one action."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import urlparse

from app.core.units import human_size
from app.hardware.fit import FitEstimate, Verdict
from app.library.model_files.model_purpose import ModelPurpose, not_for_chat
from app.service.events import CatalogRow, ModelRow
from app.ui.state.fit_verdict import EMBEDDING_REASON, EMBEDDING_WORDS, verdict_of, verdict_tooltip, verdict_words
from app.ui.state.model_items import parameters_text, status_text

# The capabilities a card tags, in the order shown, with their words. Read from
# details["capabilities"] (installed) or the entry's `capabilities` (catalog) where the
# library or catalog knows them; a model neither says anything about gets no tag.
CAPABILITY_WORDS: dict[str, str] = {"vision": "Vision", "tools": "Tools", "reasoning": "Reasoning",
                                    "embedding": "Embedding"}
_HUB_HOSTS = ("huggingface.co", "hf.co")


class CardAction(Enum):
    """A card's one primary action; its value is the button's words."""

    DOWNLOAD = "Download"
    LOAD = "Load"
    LOADED = "Loaded"


@dataclass(frozen=True)
class CardFacts:
    """Everything one model card shows, in words, so a card is drawn from this alone.

    key: the model id (installed) or catalog id. facts: size, parameters, quantization
    (each only when known). verdict: None while the fit is not known (a grey badge).
    reason: the verdict's one line (its numbers are in verdict_tip). status: default,
    loaded, where it is kept, what is wrong. action_target: the library model the action
    loads (a catalog entry's installed model), or the key.
    """

    key: str
    title: str
    title_tip: str
    publisher: str
    facts: tuple[str, ...]
    verdict: Verdict | None
    verdict_words: str
    reason: str
    verdict_tip: str
    tags: tuple[str, ...]
    status: str
    action: CardAction
    action_enabled: bool
    action_tip: str
    action_target: str


def installed_facts(row: ModelRow) -> CardFacts:
    """A library model's card: Load, or Loaded (greyed) once it is; missing or unreadable files cannot load."""
    model = row.model
    details = row.details
    facts = (human_size(model.size), parameters_text(details), details.get("quantization") or "",
             str(details.get("format") or model.format).upper())
    embedding = model.purpose is not ModelPurpose.CHAT
    if model.missing:
        reason, tip = "The file is not there now.", "The file is not there now."
    elif embedding:
        reason, tip = EMBEDDING_REASON, EMBEDDING_REASON
    else:
        reason, tip = _reason(row.fit), verdict_tooltip(row.fit)
    action = CardAction.LOADED if row.is_loaded else CardAction.LOAD
    not_chat = not_for_chat(model.title, model.purpose)
    can_load = not row.is_loaded and not model.missing and row.problem is None and not_chat is None
    if not_chat is not None:
        action_tip = not_chat
    elif row.is_loaded:
        action_tip = "This model is loaded: new messages go to it."
    elif model.missing:
        action_tip = "Reconnect the drive that holds its file to load it."
    elif row.problem:
        action_tip = row.problem
    else:
        action_tip = f"Load {model.title} for the chat."
    return CardFacts(
        key=model.id, title=model.title, title_tip=str(model.path), publisher=publisher_of(model.source),
        facts=tuple(fact for fact in facts if fact and fact != "—"),
        verdict=None if model.missing or embedding else verdict_of(row.fit),
        verdict_words="File missing" if model.missing else (EMBEDDING_WORDS if embedding else verdict_words(row.fit)),
        reason=reason, verdict_tip=tip, tags=capability_tags(details.get("capabilities")),
        status=status_text(row), action=action, action_enabled=can_load, action_tip=action_tip,
        action_target=model.id)


def catalog_facts(row: CatalogRow, loaded: bool, recommended: str = "") -> CardFacts:
    """A catalog model's card: Download; once installed, Load (or Loaded) the model it became.

    loaded: whether the installed model it became is the one loaded now; recommended: why this
    is the model recommended for this machine ("" for the others), shown as its reason.
    """
    entry = row.entry
    size = human_size(entry.size) if entry.size else "size from the server"
    if row.installed_id is None:
        action, enabled = CardAction.DOWNLOAD, True
        action_tip = f"Download {entry.name} from huggingface.co/{entry.repo}"
    else:
        action = CardAction.LOADED if loaded else CardAction.LOAD
        enabled = not loaded
        action_tip = "Installed and loaded." if loaded else f"Installed: load {entry.name} for the chat."
    embedding = entry.purpose is not ModelPurpose.CHAT
    return CardFacts(
        key=entry.id, title=entry.name, title_tip=entry.description, publisher=entry.publisher,
        facts=(size, entry.parameters, entry.quantization, entry.format.upper()),
        verdict=None if embedding else verdict_of(row.fit),
        verdict_words=EMBEDDING_WORDS if embedding else verdict_words(row.fit),
        reason=EMBEDDING_REASON if embedding else recommended or (
            _reason(row.fit) if entry.size or row.fit else "Known once the download starts: the server tells its size."),
        verdict_tip=EMBEDDING_REASON if embedding else verdict_tooltip(row.fit), tags=capability_tags(getattr(entry, "capabilities", None)),
        status="Installed" if row.installed_id else ("Recommended for this computer" if recommended else ""),
        action=action, action_enabled=enabled,
        action_tip=action_tip, action_target=row.installed_id or entry.id)


def capability_tags(known: Any) -> tuple[str, ...]:
    """The words of the capabilities known (an iterable of names), in CAPABILITY_WORDS' order."""
    names = {str(name).lower() for name in known or ()}
    return tuple(words for name, words in CAPABILITY_WORDS.items() if name in names)


def publisher_of(source: str) -> str:
    """Who published a library model, when its source says: a Hugging Face repository's owner.

    An imported file or the starter package names no publisher (""): the details say where it came from.
    """
    address = urlparse(source)
    if address.hostname not in _HUB_HOSTS:
        return ""
    parts = [part for part in address.path.split("/") if part]
    return parts[0] if len(parts) >= 2 else ""


def _reason(fit: FitEstimate | None) -> str:
    """The verdict's one line: where it runs and why (with a speed verdict, whose words already hold the
    speed: the memory's line and what other programs use now); what to expect while it is not known."""
    if fit is None:
        return "Known once Kestrel has read this machine's memory."
    if fit.speed is None:
        return fit.summary
    said = [line.removeprefix("Memory: ") for line in fit.lines if line.startswith("Memory: ")]
    said += [line for line in fit.lines if line.startswith("Other programs use")]
    return " · ".join(said) or fit.summary
