"""Whether a GBNF grammar is within what llama.cpp can hold (app/engine/grammar_bounds.py has the measures).

llama.cpp's parser recurses once per group nested in another, and its sampler (advance_stack) once
per rule it enters at the front of another: past the stack, a SIGSEGV of the engine. So before a
grammar reaches llama.cpp, whichever path made it, it is read here, in pure Python and with no
recursion: its size, how deep its groups nest, the counts of its {m,n}, the alternatives of one
rule, and how deep its rules start inside one another (summed along each alternative's start that
can match nothing, as advance_stack goes on into what follows an empty rule).
"""

from __future__ import annotations

import re

from app.engine.grammar_bounds import MAX_CHOICES, MAX_GRAMMAR_BYTES, MAX_GROUP_DEPTH, MAX_LEFT_DEPTH, MAX_REPEAT

# An element of a sequence: (the node it enters, -1 for a terminal; the fewest and most times it
# repeats; whether a postfix (?, *, +, {m,n}) made a rule of it; whether it is the empty literal "").
_Item = tuple[int, int, int, bool, bool]
# A node, a rule or a group in parentheses, is its alternatives, each a sequence of elements.
_Node = list[list[_Item]]

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+|\#[^\n]*) | (?P<newline>\n) | (?P<define>::=) | (?P<name>[A-Za-z0-9-]+)
    | (?P<literal>"(?:[^"\\]|\\.)*") | (?P<cls>\[(?:[^\]\\]|\\.)*\]) | (?P<token>!?<[^>\n]*>)
    | (?P<repeat>\{[ \t]*\d*[ \t]*(?:,[ \t]*\d*[ \t]*)?\}) | (?P<op>[()|*+?.]) | (?P<bad>.)
    """, re.VERBOSE | re.DOTALL)
_TERMINALS = frozenset(("literal", "cls", "token"))


class _Unreadable(Exception):
    """The grammar is past a bound, or not GBNF this check can read (so llama.cpp is not handed it)."""


def grammar_problem(text: str) -> str | None:
    """Why llama.cpp must not be handed this GBNF (in words), or None: it is within the bounds."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_GRAMMAR_BYTES:
        return f"the grammar is {size:,} bytes, more than the {MAX_GRAMMAR_BYTES:,} Kestrel hands to llama.cpp"
    try:
        nodes = _read(text)
        _check_left_depth(nodes)
    except _Unreadable as why:
        return str(why)
    return None


def _read(text: str) -> list[_Node]:
    """The grammar's rules and groups as nodes; _Unreadable past a bound or where it is not GBNF."""
    nodes: list[_Node] = []
    names: dict[str, int] = {}

    def named(name: str) -> int:
        if name not in names:
            names[name] = len(nodes)
            nodes.append([])  # no alternatives until it is defined: an undefined rule never matches nothing
        return names[name]

    stack: list[int] = []  # the rule, then the groups open inside it
    joined, expect_rule, expect_define = True, True, False  # joined: a line break continues the rule here
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "space" or (kind == "newline" and (joined or len(stack) != 1)):
            continue
        if kind == "newline":
            expect_rule = True
            continue
        token = match.group()
        if expect_define or expect_rule or kind in ("bad", "define"):
            if expect_define and kind == "define":
                expect_define, joined = False, True
                continue
            if expect_rule and kind == "name":
                number = named(token)
                nodes[number] = [[]]
                stack, expect_rule, expect_define = [number], False, True
                continue
            raise _Unreadable(f"the grammar has {token!r} where GBNF cannot have it")
        joined = token == "|"
        node = nodes[stack[-1]]
        sequence = node[-1]
        if kind == "name":
            sequence.append((named(token), 1, 1, False, False))
        elif kind in _TERMINALS or token == ".":
            sequence.append((-1, 1, 1, False, token == '""'))
        elif token == "(":
            if len(stack) > MAX_GROUP_DEPTH:
                raise _Unreadable(f"the grammar nests groups more than {MAX_GROUP_DEPTH:,} deep")
            nodes.append([[]])
            sequence.append((len(nodes) - 1, 1, 1, False, False))
            stack.append(len(nodes) - 1)
        elif token == ")":
            if len(stack) < 2:
                raise _Unreadable("the grammar closes a group it never opened")
            stack.pop()
        elif token == "|":
            node.append([])
            if len(node) > MAX_CHOICES:
                raise _Unreadable(f"a rule of the grammar has more than {MAX_CHOICES:,} alternatives")
        else:
            _repeat(nodes, sequence, token)
    if len(stack) > 1:
        raise _Unreadable("the grammar opens a group it never closes")
    return nodes


def _repeat(nodes: list[_Node], sequence: list[_Item], token: str) -> None:
    """The postfix token applied to the sequence's last element (one already repeated is grouped first)."""
    if not sequence:
        raise _Unreadable(f"the grammar has {token!r} with nothing before it to repeat")
    last = sequence.pop()
    if last[3]:
        nodes.append([[last]])
        last = (len(nodes) - 1, 1, 1, False, False)
    if token in "?*+":
        least, most = (0 if token in "?*" else 1), 1
    else:
        low, comma, high = token[1:-1].partition(",")
        least = _count(low.strip() or "0")
        most = _count(high.strip()) if comma and high.strip() else least if not comma else least + 1
    sequence.append((last[0], least, max(most, least), True, last[4]))


def _count(digits: str) -> int:
    count = int(digits) if len(digits) <= 9 else 10**9  # no need to read a 5,000-digit number
    if count > MAX_REPEAT:
        raise _Unreadable(f"the grammar repeats something {count:,} times, more than the {MAX_REPEAT:,} Kestrel "
                          "hands to llama.cpp")
    return count


def _nullable(nodes: list[_Node]) -> list[bool]:
    """Which nodes can match nothing (a worklist: each alternative counts the elements that cannot yet)."""
    empty = [False] * len(nodes)
    waiting: list[list[tuple[int, int]]] = [[] for _ in nodes]  # node -> the alternatives that wait on it
    left: dict[tuple[int, int], int] = {}
    ready: list[int] = []
    for number, node in enumerate(nodes):
        for index, sequence in enumerate(node):
            must = [item[0] for item in sequence if item[1] > 0 and not item[4]]
            left[(number, index)] = len(must)  # a terminal that must match stays counted for good
            for target in must:
                if target >= 0:
                    waiting[target].append((number, index))
            if not must and not empty[number]:
                empty[number] = True
                ready.append(number)
    while ready:
        for key in waiting[ready.pop()]:
            left[key] -= 1
            if left[key] == 0 and not empty[key[0]]:
                empty[key[0]] = True
                ready.append(key[0])
    return empty


def _check_left_depth(nodes: list[_Node]) -> None:
    """_Unreadable when the rules start inside one another deeper than MAX_LEFT_DEPTH, or a rule
    can start with itself (llama.cpp refuses that too): a post-order walk with a stack."""
    empty = _nullable(nodes)
    depth: list[int] = [-1] * len(nodes)  # -1: not yet known
    on_path = [False] * len(nodes)
    for start in range(len(nodes)):
        if depth[start] >= 0:
            continue
        stack = [start]
        while stack:
            number = stack[-1]
            on_path[number] = True
            waiting = [target for target in _front(nodes[number], empty) if depth[target] < 0]
            if any(on_path[target] for target in waiting):
                raise _Unreadable("the grammar is left-recursive (a rule can start with itself), which llama.cpp "
                                  "cannot take")
            if waiting:
                stack.append(waiting[0])
                continue
            stack.pop()
            on_path[number] = False
            depth[number] = 1 + max((_sequence_depth(sequence, empty, depth) for sequence in nodes[number]),
                                    default=0)
            if depth[number] > MAX_LEFT_DEPTH:
                raise _Unreadable(f"the grammar's rules start inside one another more than {MAX_LEFT_DEPTH:,} deep, "
                                  "more than llama.cpp can follow")


def _can_be_empty(item: _Item, empty: list[bool]) -> bool:
    return item[1] == 0 or item[4] or (item[0] >= 0 and empty[item[0]])


def _front(node: _Node, empty: list[bool]) -> list[int]:
    """The nodes an alternative of this node can start with: up to its first element that cannot be empty."""
    targets = []
    for sequence in node:
        for item in sequence:
            if item[0] >= 0:
                targets.append(item[0])
            if not _can_be_empty(item, empty):
                break
    return targets


def _sequence_depth(sequence: list[_Item], empty: list[bool], depth: list[int]) -> int:
    total = 0
    for item in sequence:
        target = item[0]
        inner = depth[target] if target >= 0 else 0
        # llama.cpp writes x{m,n} as a chain of n-m rules; when x can be empty the chain is entered at once.
        chain = max(1, item[2] - item[1]) if target >= 0 and empty[target] else 1
        total += (1 if item[3] else 0) + inner * chain
        if not _can_be_empty(item, empty):
            break
    return total
