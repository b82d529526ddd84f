"""Small GGUFs whose headers the library reads: a vision projector (clip architecture, as
llama.cpp's mmproj files are) and a text model of a chosen embedding width.

Neither loads in llama.cpp: the library reads only headers. A loadable projector is
tests/helpers/vision_gguf.py's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFWriter, LlamaFileType


def write_projector(path: Path, *, projection_dim: int | None = 64, vision: bool = True,
                    file_type: LlamaFileType | None = LlamaFileType.MOSTLY_F16, values: int = 16,
                    legacy: bool = False) -> Path:
    """A clip GGUF with an image encoder (vision) whose output is projection_dim wide (None: unstated).
    legacy: without general.type "mmproj", as older (llava-era) converters wrote projectors,
    whose projection_dim meant something else."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), "clip")
    if not legacy:
        writer.add_string("general.type", "mmproj")
    writer.add_bool("clip.has_vision_encoder", vision)
    writer.add_bool("clip.has_audio_encoder", not vision)
    writer.add_string("clip.projector_type", "mlp")
    if projection_dim is not None:
        writer.add_uint32("clip.vision.projection_dim", projection_dim)
    if file_type is not None:
        writer.add_file_type(file_type)
    writer.add_tensor("mm.2.weight", np.ones(values, dtype=np.float32))
    _finish(writer)
    return path


def write_text_model(path: Path, *, embedding_length: int | None = 64, name: str = "Tiny",
                     values: int = 16) -> Path:
    """A llama-architecture GGUF header of that embedding width, with one small tensor."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_block_count(1)
    if embedding_length is not None:
        writer.add_embedding_length(embedding_length)
    writer.add_tensor("blk.0.weight", np.ones(values, dtype=np.float32))
    _finish(writer)
    return path


def _finish(writer: GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
