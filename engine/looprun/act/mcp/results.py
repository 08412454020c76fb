"""An MCP tool's result as the text the model reads: text blocks as they are, other
content named and sized, never inlined (an image is not text), then bounded like a
command's output (head and tail kept). Plain data in, so the SDK is not needed here."""

from __future__ import annotations

import json
from typing import Any


def mcp_result_text(result: Any) -> str:
    """The text of a ``CallToolResult`` (duck-typed: content blocks, structured content)."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind in ("image", "audio"):
            data = str(getattr(block, "data", "") or "")
            mime = getattr(block, "mimeType", "") or "unknown type"
            size = len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))  # base64
            parts.append(f"[{kind} content, {mime}, {size} bytes; not shown]")
        elif kind == "resource":
            res = getattr(block, "resource", None)
            text = getattr(res, "text", None)
            uri = getattr(res, "uri", "")
            parts.append(str(text) if text is not None else f"[binary resource {uri}; not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'unknown'} content; not shown]")
    structured = getattr(result, "structuredContent", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    return "\n".join(parts) if parts else "(no content)"


def bound_output(text: str, max_bytes: int) -> str:
    """``text`` within ``max_bytes`` of UTF-8: its head and tail, and how much was cut."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    half = max(max_bytes // 2, 1)
    head = data[:half].decode("utf-8", "ignore")
    tail = data[-half:].decode("utf-8", "ignore")
    cut = len(data) - 2 * half
    return f"{head}\n[... {cut} bytes of the tool's result cut ...]\n{tail}"
