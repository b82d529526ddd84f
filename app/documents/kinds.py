"""Which files are documents: the kind of a file from its name, for the reader and the folder scan."""

from __future__ import annotations

from pathlib import Path

from app.documents.values import FileKind

_MARKDOWN = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
_TEXT = {".txt", ".text", ".log", ".csv", ".tsv", ".rst", ".org", ".adoc", ".tex", ".srt", ".vtt"}
_HTML = {".html", ".htm", ".xhtml"}
# Source and configuration files people ask about; read as text, kept whole (no headings).
_CODE = {
    ".py", ".pyi", ".ipynb", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".kts",
    ".scala", ".groovy", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".m", ".mm", ".cs", ".fs",
    ".go", ".rs", ".rb", ".php", ".swift", ".dart", ".lua", ".pl", ".pm", ".r", ".jl", ".hs", ".ml",
    ".ex", ".exs", ".erl", ".clj", ".el", ".vim", ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat",
    ".cmd", ".sql", ".css", ".scss", ".sass", ".less", ".vue", ".svelte", ".json", ".jsonl", ".yaml",
    ".yml", ".toml", ".ini", ".cfg", ".conf", ".xml", ".gradle", ".cmake", ".proto", ".graphql",
}
_BY_SUFFIX: dict[str, FileKind] = {
    **{suffix: FileKind.MARKDOWN for suffix in _MARKDOWN},
    **{suffix: FileKind.TEXT for suffix in _TEXT},
    **{suffix: FileKind.HTML for suffix in _HTML},
    **{suffix: FileKind.CODE for suffix in _CODE},
    ".pdf": FileKind.PDF,
    ".docx": FileKind.DOCX,
}
# Files without a suffix that are text by convention.
_BY_NAME: dict[str, FileKind] = {
    "readme": FileKind.TEXT, "license": FileKind.TEXT, "copying": FileKind.TEXT, "notice": FileKind.TEXT,
    "authors": FileKind.TEXT, "changelog": FileKind.TEXT, "makefile": FileKind.CODE,
    "dockerfile": FileKind.CODE,
}

DOCUMENT_SUFFIXES: frozenset[str] = frozenset(_BY_SUFFIX)


def file_kind(path: Path) -> FileKind | None:
    """The kind of document `path` names, or None when Kestrel does not read that kind of file
    (the folder scan skips it; an attached one is refused with the reason)."""
    kind = _BY_SUFFIX.get(path.suffix.lower())
    if kind is None and not path.suffix:
        kind = _BY_NAME.get(path.name.lower())
    return kind
