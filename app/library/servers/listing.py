"""A server's models, as it lists them: GET /v1/models (OpenAI; Anthropic's shape, page by page), /api/tags and /api/show (Ollama).

What a server says of a model's context length and abilities is read where it says it (Ollama's
/api/show: model_info's context length and its capabilities; an OpenAI-compatible server's own
fields, where it has them: its context length, and whether it takes images), and what the person set
by hand (AddedServer.overrides) wins.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from app.library.servers.faults import ServerTrouble
from app.library.servers.records import AddedServer, ModelAbility, RemoteModel, ServerKind
from app.library.servers.wire import LIST_WAIT_S, Asking, get_json

MAX_MODELS = 500  # a server listing more is cut to this many, the first ones
ANTHROPIC_PAGE = 1000  # models a page of Anthropic's list holds at most (its own limit)
MAX_SHOWN = 100  # Ollama models asked for their details (/api/show) at most; the rest are listed without
# Ollama's capability words, as /api/show writes them, and what each means here.
_OLLAMA_ABILITIES = {"tools": ModelAbility.TOOLS, "vision": ModelAbility.VISION,
                     "embedding": ModelAbility.EMBEDDINGS, "thinking": ModelAbility.THINKING}


def list_models(server: AddedServer, key: str | None) -> tuple[RemoteModel, ...]:
    """Every model the server lists, with the person's overrides; ServerFault when it cannot be listed."""
    asking = Asking(server, key, LIST_WAIT_S)
    if server.kind == ServerKind.OLLAMA:
        found = _ollama_models(asking)
    elif server.kind == ServerKind.ANTHROPIC:
        found = _anthropic_models(asking)
    else:
        found = _openai_models(asking)
    return tuple(model.with_override(server.overrides.get(model.name)) for model in found)


def find_model(server: AddedServer, key: str | None, name: str) -> RemoteModel:
    """One model of the server, as list_models gives it; ServerFault MODEL_GONE when the server lists none of that name.

    Ollama is asked for that model alone (/api/show), and answers for names it resolves
    ("llama3" for "llama3:latest") as its /api/chat does."""
    asking = Asking(server, key, LIST_WAIT_S, model=name)
    if server.kind == ServerKind.OLLAMA:
        shown = _ollama_show(asking, name, missing=ServerTrouble.MODEL_GONE)
        model = _ollama_model(server.name, name, 0, shown)
    else:
        everything = _anthropic_models(asking) if server.kind == ServerKind.ANTHROPIC else _openai_models(asking)
        listed = next((m for m in everything if m.name == name), None)
        if listed is None:
            raise asking.fault(ServerTrouble.MODEL_GONE)
        model = listed
    return model.with_override(server.overrides.get(name))


def _openai_models(asking: Asking) -> list[RemoteModel]:
    data = get_json(asking, "/models")
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise asking.fault(ServerTrouble.BAD_ANSWER, detail='its list of models has no "data" list')
    models = []
    for entry in entries[:MAX_MODELS]:
        # A Kestrel lists its speech models and voices too (app/server/speech_listing.py): they answer no chat.
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"] and \
                entry.get("type") not in ("speech-to-text", "text-to-speech"):
            models.append(RemoteModel(asking.server.name, entry["id"], _openai_context(entry),
                                      _openai_abilities(entry)))
    return models


def _anthropic_models(asking: Asking) -> list[RemoteModel]:
    """Anthropic's list: {"data": [{"type": "model", "id", "display_name", "created_at"}], "has_more",
    "last_id"}, a page at a time (after_id: the last one's id) until has_more is false or MAX_MODELS."""
    models: list[RemoteModel] = []
    after = ""
    while len(models) < MAX_MODELS:
        query = f"?limit={ANTHROPIC_PAGE}" + (f"&after_id={quote(after, safe='')}" if after else "")
        data = get_json(asking, "/models" + query)
        entries = data.get("data") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise asking.fault(ServerTrouble.BAD_ANSWER, detail='its list of models has no "data" list')
        for entry in entries[:MAX_MODELS - len(models)]:
            if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]:
                models.append(RemoteModel(asking.server.name, entry["id"], _openai_context(entry)))
        last = data.get("last_id")
        if data.get("has_more") is not True or not isinstance(last, str) or not last or last == after:
            return models
        after = last
    return models


def _openai_context(entry: dict[str, Any]) -> int | None:
    """The context length where an OpenAI-compatible server says it: Kestrel's and OpenRouter's context_length,
    LM Studio's max_context_length, llama-server's meta.n_ctx_train."""
    meta = entry.get("meta")
    for value in (entry.get("context_length"), entry.get("max_context_length"),
                  meta.get("n_ctx_train") if isinstance(meta, dict) else None):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _openai_abilities(entry: dict[str, Any]) -> frozenset[ModelAbility]:
    """What an OpenAI-compatible server says a model takes beyond text, where it says it: Kestrel's "vision": true,
    OpenRouter's architecture.input_modalities holding "image". Abilities stay not known (abilities_known False):
    a server that says vision says nothing of tools, which are then asked as before."""
    architecture = entry.get("architecture")
    modalities = architecture.get("input_modalities") if isinstance(architecture, dict) else None
    sees = entry.get("vision") is True or (isinstance(modalities, list) and "image" in modalities)
    return frozenset({ModelAbility.VISION}) if sees else frozenset()


def _ollama_models(asking: Asking) -> list[RemoteModel]:
    data = get_json(asking, "/api/tags")
    entries = data.get("models") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise asking.fault(ServerTrouble.BAD_ANSWER, detail='its list of models has no "models" list')
    models = []
    for number, entry in enumerate(entries[:MAX_MODELS]):
        name = entry.get("name") or entry.get("model") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            continue
        size = entry.get("size") if isinstance(entry.get("size"), int) else 0
        shown = _ollama_show(asking, name, missing=ServerTrouble.MODEL_GONE) if number < MAX_SHOWN else {}
        models.append(_ollama_model(asking.server.name, name, size, shown))
    return models


def _ollama_show(asking: Asking, name: str, *, missing: ServerTrouble) -> dict[str, Any]:
    shown = get_json(asking, "/api/show", {"model": name}, missing=missing)
    if not isinstance(shown, dict):
        raise asking.fault(ServerTrouble.BAD_ANSWER, detail="its details of a model are not a JSON object")
    return shown


def _ollama_model(server: str, name: str, size: int, shown: dict[str, Any]) -> RemoteModel:
    """What /api/show says: the context length in model_info ("<architecture>.context_length") and the
    capabilities list (Ollama 0.6 and later; an older one says none, so they stay unknown)."""
    info = shown.get("model_info")
    context = None
    if isinstance(info, dict):
        values = [v for k, v in info.items() if str(k).endswith(".context_length")]
        context = next((v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0), None)
    words = shown.get("capabilities")
    if not isinstance(words, list):
        return RemoteModel(server, name, context, frozenset(), False, size)
    return RemoteModel(server, name, context, frozenset(_OLLAMA_ABILITIES[w] for w in words if w in _OLLAMA_ABILITIES),
                       True, size)
