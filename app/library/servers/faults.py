"""What went wrong with a server the person added, as facts (ServerFacts) and in the words every front end shows."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import assert_never


class ServerTrouble(StrEnum):
    """What a server did, so the words can say what to do. Crosses the engine's pipe: add, never rename."""

    DOWN = "down"  # nothing answered at the address: refused, no route, the name not found, no answer to connect
    SLOW = "slow"  # connected, then no word within its wait
    SERVER_ERROR = "server_error"  # it answered 5xx, or an error inside its stream
    DROPPED = "dropped"  # the connection closed before the answer's end
    KEY = "key"  # 401 or 403: the key is wrong, expired or missing
    MODEL_GONE = "model_gone"  # the model is not on the server (now)
    NOT_FOUND = "not_found"  # the API path is not there: a wrong address or kind
    REFUSED = "refused"  # another 4xx, with the server's own words (a prompt too long for it, a bad value)
    BAD_ANSWER = "bad_answer"  # it answered something that is not its API's shape
    TLS = "tls"  # an https server whose certificate could not be checked
    NOT_ADDED = "not_added"  # an address naming a server the person has not added (or removed)
    NOT_YET = "not_yet"  # a kind Kestrel cannot chat with yet (none now; kept, as values on the pipe are)
    CERT_CHANGED = "cert_changed"  # a paired Kestrel shows another certificate than the one pinned at pairing


@dataclass(frozen=True)
class ServerFacts:
    """One server's failure: which server (its name and address), what happened, and what it said.

    status: the HTTP status it answered (0: none). detail: its own message, bounded, or the system's
    ("Connection refused"). wait_s: for SLOW, how long Kestrel waited. model: the model asked for.
    key_sent: for KEY, whether Kestrel sent a key at all.
    """

    server: str
    url: str
    trouble: ServerTrouble
    status: int = 0
    detail: str = ""
    wait_s: float = 0.0
    model: str = ""
    key_sent: bool = False
    kind_title: str = ""  # "an Ollama server": what it was added as
    paired: bool = False  # a Kestrel paired through Kestrel Link (its key came from pairing)


class ServerFault(Exception):
    """A server failed a request; facts say how, str() in words."""

    def __init__(self, facts: ServerFacts) -> None:
        self.facts = facts
        super().__init__(fault_words(facts))


def fault_words(facts: ServerFacts) -> str:
    """The failure in plain words that name the server and end with what to do."""
    who = f"{facts.server} ({facts.url})"
    said = f": {facts.detail}" if facts.detail else ""
    match facts.trouble:
        case ServerTrouble.DOWN:
            return (f"{who} did not answer{said}. Is it on, and is its server running? Check the address, "
                    "then try again.")
        case ServerTrouble.SLOW:
            return (f"{who} did not answer within {facts.wait_s:.0f} s. It may be busy or still loading the model: "
                    "try again, or allow it longer to answer in the server's settings.")
        case ServerTrouble.SERVER_ERROR:
            status = f" (HTTP {facts.status})" if facts.status else ""
            return f"{who} failed with an error of its own{status}{said}. Look at the server's log, then try again."
        case ServerTrouble.DROPPED:
            return (f"{who} stopped answering partway through: the connection closed. What was written is kept; "
                    "try again.")
        case ServerTrouble.KEY if facts.paired:
            return (f"{who} no longer lets this PC in (HTTP {facts.status}): it was removed from that PC's paired "
                    f"devices, or Kestrel there was reset. Pair again: make a new pairing code on that PC (View → "
                    f"API server…, or kestrel link code), remove {facts.server} here and add it again as another "
                    "Kestrel with the code.")
        case ServerTrouble.KEY:
            problem = "refused the key Kestrel sent" if facts.key_sent else "wants a key, and none is set for it"
            return (f"{who} {problem} (HTTP {facts.status}). Set the server's key again (in the model manager, or "
                    f'with kestrel servers key "{facts.server}"), then try again.')
        case ServerTrouble.MODEL_GONE:
            return (f'{who} has no model "{facts.model}" now: it was removed or renamed there. Choose another of its '
                    "models.")
        case ServerTrouble.NOT_FOUND:
            kind = f" as {facts.kind_title}" if facts.kind_title else ""
            return (f"{who} answered, but not{kind}: the address it was asked at is not there (HTTP 404). Check the "
                    "address and the server's kind.")
        case ServerTrouble.REFUSED:
            return f"{who} refused the request (HTTP {facts.status}){said}."
        case ServerTrouble.BAD_ANSWER:
            kind = f" as {facts.kind_title}" if facts.kind_title else ""
            return (f"{who} answered something Kestrel cannot read{kind}{said}. Check that the address and the "
                    "server's kind are right.")
        case ServerTrouble.TLS:
            return f"{who}'s certificate could not be checked{said}. Check the address, or the server's certificate."
        case ServerTrouble.NOT_ADDED:
            return (f'No server called "{facts.server}" is among the servers you added, so Kestrel does not contact '
                    "it. Add it first (kestrel servers add), or choose another model.")
        case ServerTrouble.CERT_CHANGED:
            return (f"{facts.server}'s certificate changed since you paired ({facts.url}), so Kestrel did not "
                    f"connect. If you reinstalled Kestrel there, pair again: make a new pairing code on that PC "
                    f"(View → API server…, or kestrel link code), remove {facts.server} here and add it again as "
                    "another Kestrel with the code. If nothing changed there, someone may be between the two "
                    "computers: do not pair until you know why.")
        case ServerTrouble.NOT_YET:
            return (f"{who} is {facts.kind_title or 'a server'} that Kestrel cannot chat with yet. Add it as an "
                    "OpenAI-compatible server if it speaks that too.")
        case _:
            assert_never(facts.trouble)
