"""An MCP server built with the official Python SDK (FastMCP, stdio), for the tests: tools
that behave well, and ones that misbehave the ways a real server can.

``--hang-at-start`` never answers ``initialize``; ``--exit-at-start`` dies before it;
``--http PORT`` serves streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mcp.server.fastmcp import FastMCP


def _port() -> int:
    return int(sys.argv[sys.argv.index("--http") + 1]) if "--http" in sys.argv else 8000


server = FastMCP("looprun-test", host="127.0.0.1", port=_port())


@server.tool()
def echo(text: str) -> str:
    """Answer with the text given."""
    return f"echo: {text}"


@server.tool()
def read_note(path: str) -> str:
    """Read a text file (the path is relative to the server's working directory)."""
    return Path(path).read_text()


@server.tool()
def write_note(path: str, text: str) -> str:
    """Write a text file and say where it went."""
    Path(path).write_text(text)
    return f"wrote {path}"


@server.tool()
def big(kilobytes: int) -> str:
    """Answer with that many kilobytes of text."""
    return "".join(f"line {i:06d} " + "x" * 1000 + "\n" for i in range(kilobytes))


@server.tool()
def environment(name: str) -> str:
    """The value of an environment variable of the server, or '(unset)'."""
    return os.environ.get(name, "(unset)")


@server.tool()
def leak(text: str) -> str:
    """Answer with the text given, which may hold a secret the caller passed."""
    return f"the secret is {text}"


@server.tool()
def write_outside(path: str) -> str:
    """Try to write a file at an absolute path; say what happened."""
    try:
        Path(path).write_text("escaped")
    except OSError as exc:
        return f"refused: {exc}"
    return "written"


@server.tool()
def crash() -> str:
    """Exit the whole server at once."""
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answer."""
    while True:
        time.sleep(60)


if __name__ == "__main__":
    if "--hang-at-start" in sys.argv:
        while True:
            time.sleep(60)
    if "--exit-at-start" in sys.argv:
        print("cannot start: no configuration", file=sys.stderr)
        sys.exit(1)
    server.run("streamable-http" if "--http" in sys.argv else "stdio")
