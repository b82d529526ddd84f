"""Reads the type of an ONNX decoder's KV cache from its graph, without loading the model.

The cache has the element type of the graph's past_key_values inputs, which the export
chose: ONNX Runtime GenAI's model builder writes float32 for CPU exports and float16 for
GPU ones, and genai_config.json does not say which. The graph does, and reading it
needs only the protobuf's field headers: everything big (the weights, the nodes) is
skipped over by its length, so a multi-GB model.onnx costs a few hundred seeks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import BinaryIO, Iterator

from app.hardware.memory import ONNX_KV_FALLBACK
from app.library.model_files.model_format import OnnxFolderInfo

# onnx.TensorProto.DataType -> bytes per element, for the types a KV cache is kept in.
_ELEMENT_BYTES = {1: 4, 2: 1, 3: 1, 10: 2, 11: 8, 16: 2, 17: 1, 18: 1, 19: 1, 20: 1}
# Field numbers: ModelProto.graph, GraphProto.input, ValueInfoProto.name and .type,
# TypeProto.tensor_type, TypeProto.Tensor.elem_type.
_GRAPH, _INPUT, _NAME, _TYPE, _TENSOR_TYPE, _ELEM_TYPE = 7, 11, 1, 2, 1, 1
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
_DEFAULT_PAST_KEY = "past_key_values.%d.key"
# A field's value: a number, or where a length-delimited field lies (offset, size).
Field = int | tuple[int, int]


def kv_element_bytes(info: OnnxFolderInfo) -> int:
    """Bytes per element of the model's KV cache; ONNX_KV_FALLBACK when the graph does not say."""
    try:
        name = _first_past_key_name(info.path / "genai_config.json")
        with open(info.decoder_file, "rb") as graph:
            elem_type = _input_elem_type(graph, graph.seek(0, 2), name.encode("utf-8"))
    except (OSError, ValueError, EOFError, TypeError, AttributeError, RecursionError):
        # A damaged file is the loader's to report, with words for the user.
        return ONNX_KV_FALLBACK
    return _ELEMENT_BYTES.get(elem_type or 0, ONNX_KV_FALLBACK)


def _first_past_key_name(config_file: Path) -> str:
    config = json.loads(config_file.read_text(encoding="utf-8"))
    pattern = config.get("model", {}).get("decoder", {}).get("inputs", {}).get("past_key_names")
    pattern = pattern if isinstance(pattern, str) else _DEFAULT_PAST_KEY
    return pattern % 0 if "%d" in pattern else pattern


def _input_elem_type(graph: BinaryIO, end: int, name: bytes) -> int | None:
    """The elem_type of the graph input called name, or None when there is none."""
    for number, value in _fields(graph, 0, end):
        if number != _GRAPH or not isinstance(value, tuple):
            continue
        for field, info in _fields(graph, value[0], value[0] + value[1]):
            if field == _INPUT and isinstance(info, tuple):
                fields = _message(graph, info)
                if _read(graph, fields.get(_NAME)) == name:
                    tensor = _message(graph, fields.get(_TYPE)).get(_TENSOR_TYPE)
                    elem_type = _message(graph, tensor).get(_ELEM_TYPE)
                    return elem_type if isinstance(elem_type, int) else None
    return None


def _fields(stream: BinaryIO, start: int, end: int) -> Iterator[tuple[int, Field]]:
    """(number, value) of each field in stream[start:end]: an int, or a length-delimited
    field's (offset, size), so that a caller reads only the fields it wants."""
    position = start
    while position < end:
        stream.seek(position)  # the caller may have read elsewhere since the last field
        key = _read_varint(stream)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value: Field = _read_varint(stream)
            position = stream.tell()
        elif wire == _LENGTH:
            size = _read_varint(stream)
            value = (stream.tell(), size)
            position = stream.tell() + size
        elif wire in (_FIXED64, _FIXED32):
            value = 0
            position = stream.tell() + (8 if wire == _FIXED64 else 4)
        else:
            raise ValueError(f"wire type {wire} is not protobuf's")
        if position > end:
            raise ValueError("a field runs past the end of its message")
        yield number, value


def _message(stream: BinaryIO, span: Field | None) -> dict[int, Field]:
    """The fields of a small message by number (the last of a repeated one)."""
    if not isinstance(span, tuple):
        return {}
    return dict(_fields(stream, span[0], span[0] + span[1]))


def _read(stream: BinaryIO, span: Field | None) -> bytes | None:
    if not isinstance(span, tuple):
        return None
    stream.seek(span[0])
    return stream.read(span[1])


def _read_varint(stream: BinaryIO) -> int:
    result = shift = 0
    while True:
        byte = stream.read(1)
        if not byte:
            raise EOFError("the file ends inside a field")
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return result
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 64 bits")
