"""Source and configuration files people ask about: read as text and kept whole (their comments are no headings)."""

from __future__ import annotations

from app.documents.readers import OpenedFile, ReadText, document_format
from app.documents.readers.text_files import decoded_text, plain_sections


@document_format(kind="code", name="source code", noun="source file", order=60, whole_in_memory=True,
                 extensions=(
                     ".py", ".pyi", ".ipynb", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".kts",
                     ".scala", ".groovy", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".m", ".mm", ".cs",
                     ".fs", ".go", ".rs", ".rb", ".php", ".swift", ".dart", ".lua", ".pl", ".pm", ".r", ".jl", ".hs",
                     ".ml", ".ex", ".exs", ".erl", ".clj", ".el", ".vim", ".sh", ".bash", ".zsh", ".fish", ".ps1",
                     ".bat", ".cmd", ".sql", ".css", ".scss", ".sass", ".less", ".vue", ".svelte", ".json", ".jsonl",
                     ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".xml", ".gradle", ".cmake", ".proto",
                     ".graphql",
                 ),
                 file_names=("Makefile", "Dockerfile"),
                 mime_types=("text/x-python", "text/javascript", "text/x-java", "text/x-c", "text/x-c++", "text/x-go",
                             "text/rust", "text/x-shellscript", "application/sql", "text/css", "application/json",
                             "application/yaml", "application/toml", "application/xml", "text/x-makefile"))
def read_code(opened: OpenedFile) -> ReadText:
    decoded = decoded_text(opened)
    return ReadText(plain_sections(decoded.text), decoded.note)
