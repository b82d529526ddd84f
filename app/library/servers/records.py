"""What the person added and what a server has: AddedServer, its per-model overrides, RemoteModel, and their addresses."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

# The engine's address of a model on an added server: remote://<server name>/<the model's id there>.
SCHEME = "remote://"
# How long an answer may wait for the server's next word (its first token included) before it is
# called slow, unless the person set another wait for that server: a big model loading takes a while.
DEFAULT_WAIT_S = 120.0
_NAME = re.compile(r"^[\w][\w .-]{0,39}$")
# The context lengths a person may set by hand: the engine's shortest (app.library.fit_facts.MIN_CONTEXT)
# up to the longest any server says today (a million tokens and more), with room.
MIN_SET_CONTEXT = 256
MAX_SET_CONTEXT = 16_777_216


class ServerKind(StrEnum):
    """Which API a server speaks. Written to servers.json: add members, never rename one."""

    OPENAI = "openai"  # OpenAI-compatible: LM Studio, llama-server, vLLM, Jan (/v1/models, /v1/chat/completions)
    ANTHROPIC = "anthropic"  # Anthropic-compatible: /v1/models in its shape, /v1/messages
    OLLAMA = "ollama"  # Ollama's own API (/api/tags, /api/show, /api/chat)
    KESTREL = "kestrel"  # another Kestrel's API server, spoken to in its OpenAI shape

    @property
    def described(self) -> str:
        return {ServerKind.OPENAI: "an OpenAI-compatible server", ServerKind.ANTHROPIC: "an Anthropic-compatible server",
                ServerKind.OLLAMA: "an Ollama server", ServerKind.KESTREL: "another Kestrel"}[self]

    @property
    def speaks_openai(self) -> bool:
        return self in (ServerKind.OPENAI, ServerKind.KESTREL)


class ModelAbility(StrEnum):
    """What a remote model can do beyond text, as its server says or the person set. Written to servers.json."""

    TOOLS = "tools"
    VISION = "vision"
    EMBEDDINGS = "embeddings"
    THINKING = "thinking"


@dataclass(frozen=True)
class ModelOverride:
    """What the person set by hand for one model of a server, where the server does not say it (None: as it says)."""

    context_length: int | None = None
    abilities: frozenset[ModelAbility] | None = None

    @property
    def empty(self) -> bool:
        """Nothing is set by hand: the model is as its server says."""
        return self.context_length is None and self.abilities is None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.context_length is not None:
            data["context_length"] = self.context_length
        if self.abilities is not None:
            data["abilities"] = sorted(self.abilities)
        return data

    @classmethod
    def from_json(cls, data: object) -> ModelOverride:
        if not isinstance(data, dict):
            return cls()
        context = data.get("context_length")
        abilities = data.get("abilities")
        return cls(context if isinstance(context, int) and not isinstance(context, bool) and context > 0 else None,
                   frozenset(ModelAbility(a) for a in abilities if a in set(ModelAbility))
                   if isinstance(abilities, list) else None)


@dataclass(frozen=True)
class AddedServer:
    """One server the person added: the name they gave it, the API it speaks, where it is.

    url: the address as normalized when it was added (no trailing slash, no user or password).
    wait_s: how long an answer waits for the server's next word before it is called slow.
    overrides: by the model's id on the server. The key is not here: app/library/servers/keys.py.
    pin: for a paired Kestrel, the SHA-256 fingerprint of its certificate (hex), checked on every
    connection instead of a certificate authority ("": none, the system's authorities check https).
    """

    name: str
    kind: ServerKind
    url: str
    added: float = 0.0
    wait_s: float = DEFAULT_WAIT_S
    overrides: Mapping[str, ModelOverride] = field(default_factory=dict)
    pin: str = ""

    def api_url(self, path: str) -> str:
        """The full URL of an endpoint: an OpenAI path ("/models") under the URL's /v1 (added when the
        person left it out), an Ollama path ("/api/tags") under the server's root."""
        if self.kind.speaks_openai or self.kind == ServerKind.ANTHROPIC:
            root = self.url if self.url.endswith("/v1") else self.url + "/v1"
        else:
            root = self.url.removesuffix("/api")
        return root + path

    @property
    def host(self) -> str:
        """host:port, for the answer line ("studio-pc (192.168.1.20:11434)")."""
        return urlsplit(self.url).netloc

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "kind": self.kind.value, "url": self.url, "added": self.added}
        if self.wait_s != DEFAULT_WAIT_S:
            data["wait_s"] = self.wait_s
        models = {model: override.to_json() for model, override in sorted(self.overrides.items()) if override.to_json()}
        if models:
            data["models"] = models
        if self.pin:
            data["pin"] = self.pin
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AddedServer:
        """KeyError, ValueError or TypeError for an entry that is not a server."""
        wait = data.get("wait_s", DEFAULT_WAIT_S)
        models = data.get("models") or {}
        if not isinstance(models, dict):
            raise TypeError("models is not an object")
        return cls(checked_name(str(data["name"])), ServerKind(data["kind"]), checked_url(str(data["url"])),
                   float(data.get("added", 0.0)), float(wait) if isinstance(wait, (int, float)) and wait > 0
                   else DEFAULT_WAIT_S, {str(k): ModelOverride.from_json(v) for k, v in models.items()},
                   checked_pin(str(data.get("pin", ""))))


@dataclass(frozen=True)
class RemoteModel:
    """A model a server has, as it said and as the person set: listed beside the local models.

    context_length: None when neither the server nor the person says it. abilities_known: the server
    said what the model can do (Ollama's /api/show) or the person set it; otherwise abilities is empty
    because nothing was said, not because the model can do nothing. said: the model as its server said
    it, where the person set something by hand (by_hand); None where the person set nothing.
    """

    server: str
    name: str
    context_length: int | None = None
    abilities: frozenset[ModelAbility] = frozenset()
    abilities_known: bool = False
    size: int = 0
    said: RemoteModel | None = field(default=None, compare=False, repr=False)
    by_hand: ModelOverride | None = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        """How the person names it (`kestrel chat --model studio-pc/llama3.1:8b`)."""
        return f"{self.server}/{self.name}"

    @property
    def address(self) -> str:
        return remote_address(self.server, self.name)

    @property
    def as_said(self) -> RemoteModel:
        """The model as its server said it, before anything the person set by hand."""
        return self.said or self

    @property
    def abilities_in_use(self) -> frozenset[ModelAbility]:
        """What Kestrel uses the model for: its abilities where said or set; where nothing is said, those said
        (an OpenAI-compatible server's vision) and tools, which are offered then (the server says if it cannot)."""
        return self.abilities if self.abilities_known else self.abilities | {ModelAbility.TOOLS}

    def with_override(self, override: ModelOverride | None) -> RemoteModel:
        """The model with what the person set by hand (on the model as its server said it)."""
        said = self.as_said
        if override is None or override.empty:
            return said
        return RemoteModel(said.server, said.name, override.context_length or said.context_length,
                           override.abilities if override.abilities is not None else said.abilities,
                           said.abilities_known or override.abilities is not None, said.size, said, override)


def remote_address(server: str, model: str) -> str:
    """remote://<server>/<model>: what the engine's remote backend loads (Load.model_path)."""
    return f"{SCHEME}{quote(server, safe='')}/{quote(model, safe='/:@+')}"


def parse_address(text: str) -> tuple[str, str] | None:
    """(server name, model id) of a remote address; None for anything else."""
    if not text.startswith(SCHEME):
        return None
    server, _, model = text[len(SCHEME):].partition("/")
    return (unquote(server), unquote(model)) if server and model else None


def split_model_id(text: str) -> tuple[str, str] | None:
    """("studio-pc", "llama3.1:8b") for "studio-pc/llama3.1:8b"; None when it has no server part."""
    server, _, model = text.partition("/")
    return (server, model) if server and model and _NAME.match(server) else None


def checked_name(name: str) -> str:
    """The name as given, trimmed; ValueError in words when it cannot name a server."""
    name = name.strip()
    if not _NAME.match(name):
        raise ValueError(f'"{name}" cannot name a server: use up to 40 letters, digits, spaces, dots, dashes or '
                         "underscores, starting with a letter or a digit (no slash: a model is named "
                         "SERVER/MODEL).")
    return name


def checked_pin(pin: str) -> str:
    """A certificate's SHA-256 fingerprint as 64 lowercase hex digits ("" for none); ValueError otherwise."""
    pin = pin.strip().lower()
    if pin and not re.fullmatch(r"[0-9a-f]{64}", pin):
        raise ValueError("A certificate's pin is 64 hex digits (its SHA-256 fingerprint).")
    return pin


def checked_url(url: str) -> str:
    """The address normalized (http:// put in front of a bare host:port, no trailing slash); ValueError in
    words when it is not an http or https address, or carries a user name or password (keys are kept apart)."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f'"{url}" is not a server address: give one like http://192.168.1.20:11434 or '
                         "https://example.com/v1.")
    if parts.username or parts.password:
        raise ValueError("Leave the user name and password out of the address: give the key on its own "
                         "(kestrel servers add … --key-stdin).")
    try:
        parts.port
    except ValueError:
        raise ValueError(f'"{url}" has a port that is not a number from 1 to 65535.') from None
    return urlunsplit((parts.scheme, parts.netloc.lower(), parts.path.rstrip("/"), "", ""))
