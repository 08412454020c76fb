"""What the model reads of an MCP result: text as it is, other content named and sized
(never inlined), structured content when there is no text, and a bound like a command's."""

from __future__ import annotations

import base64

from mcp import types

from looprun.act.mcp.results import bound_output, mcp_result_text


def test_text_images_and_resources() -> None:
    image = base64.b64encode(b"\x89PNG" + b"\0" * 3000).decode()
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="first"),
            types.ImageContent(type="image", data=image, mimeType="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.txt", text="inside"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///b.bin", blob="AAAA"),
            ),
        ]
    )
    text = mcp_result_text(result)
    assert text.splitlines() == [
        "first",
        "[image content, image/png, 3004 bytes; not shown]",
        "inside",
        "[binary resource file:///b.bin; not shown]",
    ]
    assert image not in text


def test_structured_content_without_text_and_an_empty_result() -> None:
    structured = types.CallToolResult(content=[], structuredContent={"n": 3})
    assert mcp_result_text(structured) == '{"n": 3}'
    assert mcp_result_text(types.CallToolResult(content=[])) == "(no content)"


def test_the_bound_keeps_head_and_tail_and_says_what_was_cut() -> None:
    text = "head " + "é" * 10_000 + " tail"
    out = bound_output(text, 1000)
    assert out.startswith("head ") and out.endswith(" tail")
    assert len(out.encode()) < 1100
    assert "bytes of the tool's result cut" in out
    assert bound_output("short", 1000) == "short"
