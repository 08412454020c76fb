"""The command line that starts the tests' own MCP server (``mcp_server.py``) with this
interpreter, for templates' ``act.mcp`` entries."""

from __future__ import annotations

import sys
from pathlib import Path

SERVER = Path(__file__).with_name("mcp_server.py")


def server_command(*args: str) -> list[str]:
    return [sys.executable, str(SERVER), *args]
