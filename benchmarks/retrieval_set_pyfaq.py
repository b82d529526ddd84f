"""A retrieval set made from Python's FAQ: each question heading is a query, the text under it its one relevant document.

The FAQ (Python's documentation, faq/*.rst, PSF licence) is had offline from Debian's
python3.X-doc package, whose HTML carries the reST sources under _sources/faq/. Its
questions were written by the documentation's authors, not by people searching, and each
has exactly one judged answer, the section under it (its heading left out of the
document, since that is the query); answers to neighbouring questions are the
distractors. So it is not a standard IR test set: a question's words are often repeated in
its answer, which favours BM25, and an answer that also answers another question counts
as a miss there.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.retrieval_set import RetrievalSet

DEBIAN_DOCS = Path("/usr/share/doc")
_UNDERLINE = re.compile(r"^([=\-^~*+#\"'`])\1{2,}\s*$")
# :ref:`words <target>` and :func:`name` keep their words; ``code`` keeps its code.
_ROLE = re.compile(r":[a-z:]+:`(?:([^`<]*?)\s*<[^`>]*>|([^`]*))`")
_LITERAL = re.compile(r"``([^`]*)``")


def find_faq() -> Path | None:
    """_sources/faq of an installed python3.X-doc package (the newest), or None."""
    found = sorted(DEBIAN_DOCS.glob("python3.*-doc/html/_sources/faq"),
                   key=lambda path: [int(part) for part in re.findall(r"\d+", path.parts[-4])])
    return found[-1] if found else None


def load_python_faq(folder: Path) -> RetrievalSet:
    """Every FAQ heading that ends in "?" and has text under it, from every page of `folder`."""
    documents: dict[str, tuple[str, str]] = {}
    queries: dict[str, str] = {}
    for page in sorted(folder.glob("*.rst.txt")):
        for number, (question, answer) in enumerate(_sections(page.read_text(encoding="utf-8"))):
            if question.endswith("?") and answer:
                key = f"{page.name.split('.')[0]}-{number:03}"
                documents[key] = ("", answer)
                queries[key] = question
    version = re.search(r"python3\.\d+", str(folder))
    return RetrievalSet(f"{version.group(0) if version else 'python'}-faq", documents, queries,
                        {key: frozenset({key}) for key in queries})


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, plain text under it up to the next heading) for every heading of a reST page."""
    lines = text.splitlines()
    starts = [index for index in range(len(lines) - 1)
              if lines[index].strip() and _UNDERLINE.match(lines[index + 1])
              and len(lines[index + 1].strip()) >= len(lines[index].strip())]
    sections = []
    for position, start in enumerate(starts):
        end = starts[position + 1] if position + 1 < len(starts) else len(lines)
        body = lines[start + 2:end]
        if position + 1 < len(starts) and _UNDERLINE.match(lines[end - 1] if end else ""):
            body = body[:-1]  # an overline of the next heading
        sections.append((_plain(lines[start].strip()), _plain("\n".join(body)).strip()))
    return sections


def _plain(text: str) -> str:
    text = _ROLE.sub(lambda match: match.group(1) or match.group(2), text)
    return _LITERAL.sub(r"\1", text)
