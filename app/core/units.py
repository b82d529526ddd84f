"""Numbers as a person reads them in messages: sizes on disk."""

from __future__ import annotations


def human_size(count: int) -> str:
    """Bytes as a person reads them: 512 bytes, 12.3 KB, 4.5 MB, 1.2 GB (powers of 1000,
    as file managers and download pages count)."""
    if count < 1000:
        return f"{count} bytes"
    for unit, scale in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if count < scale * 1000:
            return f"{count / scale:.1f} {unit}"
    return f"{count / 1e12:.1f} TB"
