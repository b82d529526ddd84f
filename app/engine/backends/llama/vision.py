"""A GGUF model's vision projector (an mmproj file) through llama.cpp's libmtmd.

The projector is checked from its header before native code sees it: a GGUF file that
reads well, then the library's one rule (app/library/projector.py: architecture "clip",
an image encoder, and for files made by llama.cpp's current converter, general.type
"mmproj", a projection as wide as the text model's embeddings). Then mtmd_init_from_file
loads it against the loaded text model; mtmd checks the widths again (for older files,
whose projection_dim meant something else) and says why on its log when it refuses. Any refusal leaves the model text only, with words.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import llama_cpp.mtmd_cpp as mtmd

from app.engine.backends.llama import native_log
from app.library.model_files.gguf_info import ModelFileError, read_gguf_info
from app.library.projector import fits, projector_of

# The text mtmd cuts a prompt at, one per image. Random for each projector loaded, so
# no text a user writes (or pastes) can pass for one: llama.cpp's own "<__media__>" could.
_MARKER_BYTES = 12


@dataclass
class Projector:
    """A loaded mtmd context; close() frees it (the text model must outlive it)."""

    ctx: int
    path: Path
    marker: str
    # Who the projector is (path, size, modification time): part of every image's
    # stand-in token ids, so a saved state made with another projector never matches.
    identity: bytes

    def close(self) -> None:
        if self.ctx:
            mtmd.mtmd_free(self.ctx)
            self.ctx = 0


def load_projector(path: str, llm: llama_cpp.Llama, n_embd: int, *, use_gpu: bool,
                   threads: int) -> tuple[Projector | None, str]:
    """The projector at path for this text model, or None and why not (the words
    Loaded.vision_problem carries)."""
    file = Path(path)
    problem = header_problem(file, n_embd)
    if problem:
        return None, problem
    params = mtmd.mtmd_context_params_default()
    params.use_gpu = use_gpu
    params.print_timings = False
    params.n_threads = threads
    params.warmup = False
    marker = f"<__kestrel_image_{secrets.token_hex(_MARKER_BYTES)}__>".encode()
    params.media_marker = marker
    native_log.capture_mtmd()
    native_log.clear()
    ctx = mtmd.mtmd_init_from_file(str(file).encode("utf-8"), llm.model, params)
    if not ctx:
        return None, _refused_words(file, n_embd)
    if not mtmd.mtmd_support_vision(ctx):
        mtmd.mtmd_free(ctx)
        return None, _words(file, "it reads no images (it is for sound only)")
    stat = file.stat()
    identity = hashlib.sha256(f"{file.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).digest()
    return Projector(ctx, file, marker.decode(), identity), ""


def header_problem(file: Path, n_embd: int) -> str:
    """Why the header says the file cannot be this model's projector; "" when it may be."""
    if not file.is_file():
        return _words(file, "the file is not there", "Pair the model with its projector again.")
    try:
        info = read_gguf_info(file)
    except ModelFileError as exc:
        return _words(file, exc.message.rstrip("."), "Download the projector again.")
    found = projector_of(info)
    if found is None:
        return _words(file, f"it is not a vision projector (its header says architecture '{info.architecture}')")
    if not found.vision:
        return _words(file, "it holds no image encoder")
    if not fits(found, n_embd):
        return _mismatch(file, found.projection_dim or 0, n_embd)
    return ""


def _refused_words(file: Path, n_embd: int) -> str:
    """Why mtmd_init_from_file returned NULL, from what it logged."""
    errors = native_log.recent_errors(limit=6)
    for line in errors:
        # mtmd.cpp: "mismatch between text model (n_embd = 896) and mmproj (n_embd = 2560)"
        if "mismatch between text model" in line and "mmproj (n_embd = " in line:
            try:
                width = int(line.split("mmproj (n_embd = ")[1].split(")")[0])
            except (IndexError, ValueError):
                break
            return _mismatch(file, width, n_embd)
    reason = "; ".join(line.rstrip(".") for line in errors[-2:]) or "it gave no reason"
    return _words(file, f"llama.cpp refused it ({reason})",
                  "The file may be damaged or made for a newer llama.cpp: download it again, or update Kestrel.")


def _mismatch(file: Path, width: int, n_embd: int) -> str:
    return _words(file, f"it was made for a model with {width:,}-wide embeddings, not this one's {n_embd:,}")


def _words(file: Path, why: str, advice: str = "Pair the model with its own projector.") -> str:
    return f"The vision projector {file.name} could not be loaded: {why}. {advice}"


