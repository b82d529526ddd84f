"""What one answer's tool calls gave back: a repeated call answered from the first, and the
words shown when the model writes nothing after the results."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.conversation import ToolResultPart
from app.engine.protocol import ToolCall

# Small models call the same tool with the same arguments again and again (Qwen2.5-Coder 1.5B
# asked mcp-server-time for Tokyo's time twice in one answer). Running it again tells them
# nothing new; the first result again, with words saying it was not run and asking for the
# answer, is what turns them to writing one.
REPEATED = ("[Kestrel: not run again: this is the same call, with the same arguments, as one "
            "made earlier in this answer. Its result was:]\n{result}\n[Answer the user with this result.]")

NO_ANSWER = "The model gave no answer after using the tools; here is what they returned:"

# The results shown in place of a missing answer: enough to read the time or the weather from,
# never a whole page a tool returned (that stays in the tool parts above).
RESULT_CHARS = 600
RESULTS_CHARS = 2_000


@dataclass
class ToolsAnswered:
    """The calls one answer ran and their results, in order (one per distinct call)."""

    _results: dict[tuple[str, str], ToolResultPart] = field(default_factory=dict)
    _names: list[tuple[str, ToolResultPart]] = field(default_factory=list)

    def repeat(self, call: ToolCall) -> ToolResultPart | None:
        """The result to give a call already made in this answer, without running it; None for a
        call not made before."""
        first = self._results.get(call.key())
        if first is None:
            return None
        return ToolResultPart(call.id, REPEATED.format(result=first.text), is_error=first.is_error,
                              denied=first.denied)

    def ran(self, call: ToolCall, result: ToolResultPart) -> None:
        """A call that ran (or was refused by the user) and what it gave back."""
        if call.key() not in self._results:
            self._results[call.key()] = result
            self._names.append((call.name, result))

    @property
    def any(self) -> bool:
        return bool(self._names)

    def no_answer(self) -> str:
        """The words that stand for an answer the model did not write after its tools' results:
        saying so, then each result, cut to a few lines."""
        lines = [NO_ANSWER, ""]
        room = RESULTS_CHARS
        for number, (name, result) in enumerate(self._names):
            if room <= 0:
                lines.append(f"(and {len(self._names) - number} more, in the tool calls above)")
                break
            text = result.text.strip() or "(nothing)"
            shown = text[:min(RESULT_CHARS, max(room, 0))]
            cut = "…" if len(shown) < len(text) else ""
            label = " (an error)" if result.is_error else " (not allowed)" if result.denied else ""
            lines.append(f"{name}{label}: {shown}{cut}")
            room -= len(shown)
        return "\n".join(lines)
