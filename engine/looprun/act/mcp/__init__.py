"""MCP servers as act tools: the official ``mcp`` SDK as the client, its asyncio kept in
``client`` (one event loop on a thread of its own); the rest of the engine calls plain,
bounded, blocking methods."""

from looprun.errors import EXIT_INVALID, LooprunError


class McpStartError(LooprunError):
    """A declared server did not start, hung at start, or lacks a tool the template
    names: a setup problem, found before any model call."""

    exit_code = EXIT_INVALID
