"""The MCP servers of one run, started once, called by the Toolbox, stopped at the end.

Each server has an owner task on a private asyncio loop (a daemon thread): it opens the
transport and the SDK's ``ClientSession`` (their task groups must close in the task that
opened them), initialises, lists the tools, then waits to be told to stop. Calls are
submitted to that loop and waited for with a deadline, so a server that hangs costs one
timeout and a server that died answers at once with an error; nothing blocks the run.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from looprun.act.mcp import McpStartError
from looprun.errors import ToolError
from looprun.models.base import ToolSpec
from looprun.system.proc import note_command, scrubbed_env
from looprun.system.redact import Redactor
from looprun.template.model import McpServerSpec

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_MODEL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what every provider accepts
STDERR_TAIL = 2_000
MAX_DESCRIPTION_CHARS = 2_000


def expand(value: str, environ: Mapping[str, str]) -> str:
    """``${VAR}`` from looprun's environment; an unset one is a start error."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in environ:
            raise McpStartError(f"${{{m.group(1)}}} is not set in the environment")
        return environ[m.group(1)]

    return _VAR.sub(one, value)


@dataclass
class _Server:
    spec: McpServerSpec
    tools: dict[str, types.Tool] = field(default_factory=dict)
    session: ClientSession | None = None
    stop: asyncio.Event | None = None
    dead: str | None = None  # why it can no longer be called
    stderr: Any = None
    done: Future[None] | None = None
    finished: threading.Event = field(default_factory=threading.Event)  # transport closed


class McpServers:
    """The run's MCP servers: ``start`` them, then ``specs``/``call`` the allowed tools."""

    def __init__(
        self,
        servers: Mapping[str, McpServerSpec],
        allowed: Sequence[str],
        *,
        workdir: Path,
        sandbox: Any = None,
        environ: Mapping[str, str] | None = None,
        redactor: Redactor | None = None,
    ):
        self._servers = {name: _Server(spec) for name, spec in servers.items()}
        self._allowed = tuple(a for a in allowed if a.startswith("mcp__"))
        self.workdir = workdir
        self.sandbox = sandbox
        self._environ = dict(os.environ if environ is None else environ)
        self._redact = redactor or Redactor([])
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._cleanups: list[Any] = []
        self.offered: dict[str, tuple[str, types.Tool]] = {}  # model name -> (server, tool)

    # -- start and stop -------------------------------------------------------------------

    def start(self) -> list[str]:
        """Start every server and list its tools; the notes (allow entries that match
        nothing) come back. Raises McpStartError, with the servers stopped again."""
        try:
            for name, server in self._servers.items():
                self._start_one(name, server)
            return self._offer()
        except BaseException:
            self.close()
            raise

    def _start_one(self, name: str, server: _Server) -> None:
        spec = server.spec
        note_command()
        server.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server
        ready: Future[None] = Future()
        owner = self._own(name, server, ready)
        server.done = asyncio.run_coroutine_threadsafe(owner, self._loop)
        try:
            ready.result(timeout=spec.start_timeout_s)
        except FutureTimeout:
            raise McpStartError(
                f"MCP server {name}: no answer within {spec.start_timeout_s:g}s of starting "
                f"(act.mcp.{name}.start_timeout){self._stderr_tail(server)}"
            ) from None
        except McpStartError:
            raise
        except Exception as exc:
            raise McpStartError(
                f"MCP server {name} did not start: {self._why(exc)}{self._stderr_tail(server)}"
            ) from None

    async def _own(self, name: str, server: _Server, ready: Future[None]) -> None:
        """The owner task: open, initialise, list, wait for stop, close (all in this task)."""
        server.stop = asyncio.Event()
        try:
            async with self._transport(server) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    cursor = None
                    while True:
                        listed = await session.list_tools(cursor)
                        for tool in listed.tools:
                            server.tools[tool.name] = tool
                        cursor = listed.nextCursor
                        if not cursor:
                            break
                    server.session = session
                    if not ready.done():
                        ready.set_result(None)
                    await server.stop.wait()
        except BaseException as exc:
            server.dead = f"the server stopped: {self._why(exc)}"
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            server.session = None
            if server.dead is None:
                server.dead = "the server has stopped"
            server.finished.set()

    def _transport(self, server: _Server) -> Any:
        spec = server.spec
        if spec.url is not None:
            headers = {k: expand(v, self._environ) for k, v in spec.headers.items()}
            client = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300))
            self._cleanups.append(client)
            return streamable_http_client(spec.url, http_client=client)
        env = scrubbed_env(self._environ)
        env.update({k: expand(v, self._environ) for k, v in spec.env.items()})
        cwd = (self.workdir / spec.cwd) if spec.cwd else self.workdir
        if not os.path.realpath(cwd).startswith(os.path.realpath(self.workdir)):
            raise McpStartError(f"MCP server {spec.name}: cwd {spec.cwd!r} leaves the workdir")
        argv = list(spec.command)
        program = argv[0]
        found = (
            (cwd / program).is_file()
            if os.sep in program
            else shutil.which(program, path=env.get("PATH", os.defpath)) is not None
        )
        if not found:
            raise McpStartError(
                f"MCP server {spec.name} did not start: program not found: {program}"
            )
        if self.sandbox is not None:
            wrapped = self.sandbox.wrap(argv, cwd=cwd, env=env)
            argv, env = wrapped.argv, wrapped.env
            self._cleanups.append(wrapped.cleanup)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cwd))
        return stdio_client(params, errlog=server.stderr)

    def _offer(self) -> list[str]:
        notes = []
        for pattern in self._allowed:
            server_name, _, tool_glob = pattern[len("mcp__") :].partition("__")
            server = self._servers.get(server_name)
            if server is None:
                continue
            hits = [t for t in server.tools if fnmatch.fnmatchcase(t, tool_glob)]
            if not hits:
                have = ", ".join(sorted(server.tools)) or "none"
                if not any(c in tool_glob for c in "*?["):
                    raise McpStartError(
                        f"MCP server {server_name} has no tool {tool_glob!r}, which act.tools "
                        f"allows (its tools: {have})"
                    )
                notes.append(f"{pattern} matches none of server {server_name}'s tools ({have})")
            for tool in hits:
                model_name = f"mcp__{server_name}__{tool}"
                if not _MODEL_NAME.match(model_name):
                    notes.append(f"{model_name}: not a name models accept; not offered")
                    continue
                self.offered[model_name] = (server_name, server.tools[tool])
        for name, server in self._servers.items():
            for tool in {**server.spec.paths, **server.spec.write_paths}:
                if tool not in server.tools:
                    raise McpStartError(
                        f"act.mcp.{name}.paths names {tool!r}, which server {name} does not "
                        f"offer (its tools: {', '.join(sorted(server.tools)) or 'none'})"
                    )
        return notes

    def close(self) -> None:
        """Stop every server (closing stdin, then the process group) and the loop."""
        for server in self._servers.values():
            if server.stop is not None:
                self._loop.call_soon_threadsafe(server.stop.set)
        for server in self._servers.values():
            if server.done is None:
                continue
            # one that never got as far as waiting for stop (it hung at start) is
            # cancelled; either way its process is gone before the loop stops
            if not server.finished.wait(timeout=5 if server.session is not None else 0.1):
                server.done.cancel()
                server.finished.wait(timeout=10)
        for item in self._cleanups:
            try:
                if isinstance(item, httpx.AsyncClient):
                    asyncio.run_coroutine_threadsafe(item.aclose(), self._loop).result(5)
                else:
                    item()
            except BaseException:
                pass
        self._cleanups.clear()
        for server in self._servers.values():
            if server.stderr is not None:
                server.stderr.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    # -- what the Toolbox uses ------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        out = []
        for model_name, (_server, tool) in self.offered.items():
            params = dict(tool.inputSchema or {"type": "object", "properties": {}})
            about = " ".join((tool.description or "").split())
            if len(about) > MAX_DESCRIPTION_CHARS:  # a server's text, bounded like any
                about = about[:MAX_DESCRIPTION_CHARS] + " [...]"
            out.append(ToolSpec(model_name, self._redact.text(about), params))
        return out

    def listed(self, model_name: str) -> bool:
        """Whether a server lists this tool (offered or not): a call of one the template
        does not allow is refused by policy, not taken for a misspelling."""
        server, _, tool = model_name[len("mcp__") :].partition("__")
        return server in self._servers and tool in self._servers[server].tools

    def spec_of(self, model_name: str) -> McpServerSpec:
        return self._servers[self.offered[model_name][0]].spec

    def call(self, model_name: str, arguments: Mapping[str, Any], timeout_s: float) -> Any:
        """The ``CallToolResult``; ToolError when the server is gone or does not answer."""
        server_name, tool = self.offered[model_name]
        server = self._servers[server_name]
        session = server.session
        if server.dead is not None or session is None:
            raise ToolError(f"MCP server {server_name} is not running ({server.dead})")
        wait = timedelta(seconds=max(timeout_s, 0.1))
        note_command()
        future = asyncio.run_coroutine_threadsafe(
            session.call_tool(tool.name, dict(arguments), read_timeout_seconds=wait), self._loop
        )
        try:
            return future.result(timeout=timeout_s + 1)
        except FutureTimeout:
            future.cancel()
            raise ToolError(
                f"MCP server {server_name}: {tool.name} gave no answer within {timeout_s:g}s"
            ) from None
        except Exception as exc:
            if server.dead is not None:
                raise ToolError(f"MCP server {server_name}: {server.dead}") from None
            why = self._why(exc)
            if "timed out" in why.lower():
                why = f"{tool.name} gave no answer within {timeout_s:g}s"
            raise ToolError(f"MCP server {server_name}: {why}") from None

    # -- plain words ----------------------------------------------------------------------

    def _why(self, exc: BaseException) -> str:
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        if isinstance(exc, FileNotFoundError):
            return f"program not found: {exc.filename or exc}"
        if isinstance(exc, PermissionError):
            return f"not executable: {exc.filename or exc}"
        text = str(exc) or type(exc).__name__
        return self._redact.text(" ".join(text.split())[:500])

    def _stderr_tail(self, server: _Server) -> str:
        if server.stderr is None:
            return ""
        try:
            server.stderr.seek(0, os.SEEK_END)
            size = server.stderr.tell()
            server.stderr.seek(max(0, size - STDERR_TAIL))
            tail = server.stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends: {self._redact.text(tail)}" if tail else ""
