"""A tool's MCP result as the text the model reads: content blocks joined, the rest described, the size cut."""

from __future__ import annotations

import json

import mcp_types as types

from app.core.units import human_size
from app.tools.result_cut import CutReason, cut_result


def result_text(result: types.CallToolResult) -> str:
    """The blocks in order; text as it is, anything else described so the model knows it was there."""
    parts = [_block_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def cut_to(text: str, limit: int | None) -> tuple[str, bool]:
    """The text within the limit (in characters; None: no limit), with a note saying how much was left out."""
    if limit is None or len(text) <= limit:
        return text, False
    return cut_result(text, limit, CutReason.SETTING), True


def _block_text(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        return f"[{block.mime_type}, {_base64_size(block.data)}]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link: {block.uri}" + (f", {block.mime_type}" if block.mime_type else "") + "]"
    resource = block.resource
    if isinstance(resource, types.TextResourceContents):
        return resource.text
    return f"[resource {resource.uri}, {resource.mime_type or 'binary'}, {_base64_size(resource.blob)}]"


def _base64_size(data: str) -> str:
    """The size of the bytes a base64 text holds, in the words the rest of Kestrel uses."""
    padding = data.count("=", max(len(data) - 2, 0))
    return human_size(max(len(data) * 3 // 4 - padding, 0))
