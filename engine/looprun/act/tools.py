"""The built-in tools a model may call, each guarded by the policy.

``Toolbox.call`` never raises for a model's mistake: unknown tools, bad arguments,
refusals and failures all come back as a ``ToolResult`` for the model to read, with
the ``Violation`` attached when the policy refused. Results are redacted: values of
secret-looking environment variables never reach the model or the journal.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprun.act.diffrules import Violation
from looprun.act.edits import replace_once
from looprun.act.files import looks_binary, read_capped, walk_files
from looprun.act.mcp.results import bound_output, mcp_result_text
from looprun.act.policy import Policy
from looprun.act.tool_specs import SPECS, check_arguments, invalid_unicode
from looprun.data.value import valueclass
from looprun.errors import PolicyViolation, ToolError
from looprun.models.base import ToolCall, ToolSpec
from looprun.system.atomic import write_atomic
from looprun.system.proc import NO_BYTECODE, run_process, scrubbed_env, secret_values
from looprun.system.redact import Redactor
from looprun.template.model import BUILTIN_TOOLS, Constraints, mcp_name

if TYPE_CHECKING:
    from looprun.act.mcp.client import McpServers
    from looprun.sandbox import Sandbox

MAX_LIST_ENTRIES = 500
MAX_SEARCH_MATCHES = 200
SEARCH_TIMEOUT_S = 20.0
_WRITERS = frozenset({"write_file", "edit_file", "run"})  # tools that may change the tree
MAX_WRITE_BYTES = 10_000_000  # one write_file/edit_file result; source files are far smaller
# flag_for_human's reason reaches the verdict, the report and --json: a few sentences, not
# a transcript, so a long one is cut (model output is data, and bounded like any other)
MAX_FLAG_REASON_CHARS = 2_000


@valueclass
class ToolResult:
    """What a tool call returns to the model, with any refusal and the files it wrote."""

    content: str
    is_error: bool = False
    violation: Violation | None = None
    changed: tuple[str, ...] = ()  # workdir-relative paths written
    flag: str | None = None  # flag_for_human's reason: the turn and the run end escalated


class Toolbox:
    """The enabled tools of one act step, bound to a workdir and its constraints."""

    def __init__(
        self,
        workdir: Path,
        constraints: Constraints,
        tools: Sequence[str],
        *,
        deadline: float | None = None,
        env: Mapping[str, str] | None = None,
        sandbox: Sandbox | None = None,
        on_write: Callable[[Sequence[str] | None], None] | None = None,
        mcp: McpServers | None = None,
    ):
        unknown = [t for t in tools if t not in BUILTIN_TOOLS and not mcp_name(t)]
        if unknown:
            raise ValueError(f"unknown tool(s): {', '.join(unknown)}")
        self.mcp = mcp
        mcp_tools = tuple(mcp.offered) if mcp is not None else ()
        tools = [*(t for t in tools if t in BUILTIN_TOOLS), *mcp_tools]
        self.policy = Policy(workdir, constraints)
        self.workdir = self.policy.workdir
        self.constraints = constraints
        self.enabled: tuple[str, ...] = tuple(dict.fromkeys(tools))
        self.deadline = deadline
        self.sandbox = sandbox  # model commands run confined to it (None: unconfined)
        self.search_timeout_s = SEARCH_TIMEOUT_S
        self.max_write_bytes = MAX_WRITE_BYTES
        # told after every call that may have written to the tree: the paths written, or
        # None after a command (it may write anything), so a workspace that reuses
        # snapshots looks again
        self.on_write = on_write
        base_env = dict(os.environ if env is None else env)
        self._env = scrubbed_env(base_env, extra=NO_BYTECODE)
        secrets = [*secret_values(base_env), *secret_values()]
        self._redactor = Redactor(secrets, marker="[redacted]")
        self._handlers: dict[str, Callable[[Mapping[str, Any]], ToolResult]] = {
            **{name: self._mcp_handler(name) for name in mcp_tools},
            "read_file": self._read_file,
            "write_file": self._write_file,
            "edit_file": self._edit_file,
            "list_files": self._list_files,
            "search": self._search,
            "run": self._run,
            "flag_for_human": self._flag_for_human,
        }

    def specs(self) -> list[ToolSpec]:
        mcp = {s.name: s for s in self.mcp.specs()} if self.mcp is not None else {}
        return [mcp[name] if name in mcp else SPECS[name] for name in self.enabled]

    # -- dispatch ----------------------------------------------------------------------

    def call(self, call: ToolCall) -> ToolResult:
        """Carry out one tool call; every failure becomes a result, never an exception."""
        available = ", ".join(self.enabled) or "none"
        if call.name not in self._handlers and self.mcp is not None and self.mcp.listed(call.name):
            return self._refused(
                call.name,
                "tool.not_enabled",
                f"not allowed here: {call.name!r} (act.tools does not list it)",
            )
        if call.name not in self._handlers:
            # a slip of the model's (a misspelt or invented name), not an attempt at
            # anything the template forbids: an error it corrects, never a violation
            return ToolResult(
                self.redact(f"error: no tool named {call.name!r} (available: {available})"), True
            )
        if call.name not in self.enabled:
            return self._refused(
                call.name,
                "tool.not_enabled",
                f"not enabled here: {call.name!r} (available: {available})",
            )
        if call.arguments is None:
            why = call.error or "they were not a JSON object"
            return ToolResult(f"error: the arguments of {call.name} could not be read: {why}", True)
        problem = (
            None if call.name not in SPECS else check_arguments(SPECS[call.name], call.arguments)
        ) or invalid_unicode(call.arguments)
        if problem:
            return ToolResult(f"error: {call.name}: {problem}", True)
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return ToolResult("error: the run's time limit has been reached", True)
        result: ToolResult | None = None
        try:
            result = self._handlers[call.name](call.arguments)
        except PolicyViolation as exc:
            return self._refused(call.name, exc.rule, str(exc))
        except ToolError as exc:
            result = ToolResult(f"error: {exc}", True)
        except OSError as exc:
            result = ToolResult(f"error: {exc.strerror or exc}", True)
        except (ValueError, UnicodeError) as exc:
            result = ToolResult(f"error: {exc}", True)
        finally:
            if self.on_write is not None and (call.name in _WRITERS or mcp_name(call.name)):
                # an MCP server shares the tree: after its call, look again, like a command
                file_tool = call.name in _WRITERS and call.name != "run" and result is not None
                self.on_write(result.changed if file_tool and result else None)
        return self._redacted(result)

    def _refused(self, tool: str, rule: str, message: str) -> ToolResult:
        violation = Violation(rule, self.redact(message), tool)
        return ToolResult(f"refused by policy ({rule}): {violation.message}", True, violation)

    def redact(self, text: str) -> str:
        return self._redactor.text(text)

    def _redacted(self, result: ToolResult) -> ToolResult:
        content = self.redact(result.content)
        flag = None if result.flag is None else self.redact(result.flag)
        if content == result.content and flag == result.flag:
            return result
        return ToolResult(content, result.is_error, result.violation, result.changed, flag)

    def _remaining(self, timeout: float) -> float:
        if self.deadline is None:
            return timeout
        return max(0.0, min(timeout, self.deadline - time.monotonic()))

    # -- file tools --------------------------------------------------------------------

    def _read_text(self, path: Path, rel: str, cap: int) -> tuple[str, int]:
        if path.is_dir():
            raise ToolError(f"{rel} is a directory; use list_files to see what it holds")
        if not path.exists():
            raise ToolError(f"no such file: {rel}")
        data, size = read_capped(path, cap)
        if looks_binary(data):
            raise ToolError(f"{rel} is a binary file ({size} bytes); it cannot be shown as text")
        return data.decode("utf-8", "replace"), size

    def _read_file(self, args: Mapping[str, Any]) -> ToolResult:
        path = self.policy.check_path(args["path"], write=False)
        rel = self.policy.relative(path)
        cap = max(4096, self.constraints.max_output_bytes)
        text, size = self._read_text(path, rel, cap)
        if size > cap:
            text = text[: text.rfind("\n") + 1] or text
            text += (
                f"\n[... {rel} is {size} bytes; only the first {len(text.encode())} are shown."
                " Use search to find the part you need ...]"
            )
        return ToolResult(text)

    def _write_file(self, args: Mapping[str, Any]) -> ToolResult:
        path = self.policy.check_path(args["path"], write=True)
        rel = self.policy.relative(path)
        if path.is_dir():
            raise ToolError(f"{rel} is a directory")
        data = args["content"].encode("utf-8")
        self._check_size(rel, len(data))
        existed = path.exists()
        write_atomic(path, data, sync="none")  # as durable as any editor's save
        verb = "overwrote" if existed else "created"
        return ToolResult(f"{verb} {rel} ({len(data)} bytes)", changed=(rel,))

    def _check_size(self, rel: str, size: int) -> None:
        if size > self.max_write_bytes:
            raise ToolError(
                f"{rel} would be {size} bytes; files written by tools are limited to "
                f"{self.max_write_bytes} bytes"
            )

    def _edit_file(self, args: Mapping[str, Any]) -> ToolResult:
        path = self.policy.check_path(args["path"], write=True)
        rel = self.policy.relative(path)
        old, new = args["old"], args["new"]
        if not old:
            raise ToolError("`old` is empty; give the exact text to replace")
        if old == new:
            raise ToolError("`old` and `new` are the same; nothing would change")
        data, size = read_capped(path, 50_000_000) if path.is_file() else (b"", -1)
        if size < 0:
            self._read_text(path, rel, 1)  # says why: missing or a directory
        if looks_binary(data):
            raise ToolError(f"{rel} is a binary file; edit_file works on text")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{rel} is not valid UTF-8 text; edit_file works on text") from None
        replaced, line = replace_once(rel, text, old, new)
        updated = replaced.encode("utf-8")
        self._check_size(rel, len(updated))
        write_atomic(path, updated, sync="none")
        return ToolResult(f"edited {rel} at line {line}", changed=(rel,))

    def _list_files(self, args: Mapping[str, Any]) -> ToolResult:
        path = self.policy.check_path(args.get("path") or ".", write=False)
        rel = self.policy.relative(path)
        if not path.exists():
            raise ToolError(f"no such directory: {rel}")
        found: list[str] = []
        more = 0
        for entry in walk_files(
            self.workdir, path, include=self.policy.readable, glob=args.get("glob") or None
        ):
            if len(found) < MAX_LIST_ENTRIES:
                found.append(entry)
            else:
                more += 1
        if not found:
            return ToolResult("no files")
        if more:
            found.append(f"[... {more} more file(s); narrow the path or glob ...]")
        return ToolResult("\n".join(found))

    def _search(self, args: Mapping[str, Any]) -> ToolResult:
        pattern = args["pattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
        start = self.policy.check_path(args.get("path") or ".", write=False)
        if not start.exists():
            raise ToolError(f"no such file or directory: {self.policy.relative(start)}")
        config = {
            "root": str(self.workdir),
            "start": str(start),
            "pattern": pattern,
            "deny": list(self.constraints.paths.deny),
            "max_matches": MAX_SEARCH_MATCHES,
        }
        env = {
            "PATH": self._env.get("PATH", os.defpath),
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "PYTHONIOENCODING": "utf-8",
            "LC_ALL": "C.UTF-8",
        }
        timeout = self._remaining(self.search_timeout_s)
        proc = run_process(
            [sys.executable, "-m", "looprun.act.search", json.dumps(config)],
            cwd=self.workdir,
            timeout_s=timeout,
            env=env,
            max_output_bytes=self.constraints.max_output_bytes,
        )
        if proc.timed_out:
            raise ToolError(f"search gave up after {timeout:.0f}s; simplify the pattern or path")
        if proc.exit_code not in (0, 1):
            raise ToolError(f"search failed: {proc.output.strip()[-500:]}")
        return ToolResult(proc.output.rstrip("\n"))

    # -- MCP tools --------------------------------------------------------------------

    def _mcp_handler(self, name: str) -> Callable[[Mapping[str, Any]], ToolResult]:
        return lambda args: self._mcp_call(name, args)

    def _mcp_call(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        """One MCP tool call under the same policy: declared path arguments checked like
        read_file's (``paths``) or write_file's (``write_paths``), the call bounded by the
        server's timeout and the run's deadline, the result cut like a command's output."""
        assert self.mcp is not None
        spec = self.mcp.spec_of(name)
        tool = name.split("__", 2)[2]
        for write, declared in ((False, spec.paths), (True, spec.write_paths)):
            for arg in declared.get(tool, ()):
                value = args.get(arg)
                values = value if isinstance(value, list) else [value]
                for item in values:
                    if item is None:
                        continue
                    if not isinstance(item, str):
                        raise ToolError(f"argument {arg!r} names a path and must be a string")
                    self.policy.check_path(item, write=write)
        timeout = self._remaining(spec.call_timeout_s)
        if timeout <= 0:
            raise ToolError("the run's time limit has been reached")
        result = self.mcp.call(name, args, timeout)
        text = mcp_result_text(result)
        return ToolResult(
            bound_output(text, self.constraints.max_output_bytes), bool(result.isError)
        )

    # -- the honest exit ---------------------------------------------------------------

    def _flag_for_human(self, args: Mapping[str, Any]) -> ToolResult:
        # redacted before it is cut, so a cut never leaves half a secret behind
        reason = " ".join(self.redact(args["reason"]).split())
        if not reason:
            raise ToolError("`reason` is empty; say why the task cannot be done as asked")
        if len(reason) > MAX_FLAG_REASON_CHARS:
            cut = len(reason) - MAX_FLAG_REASON_CHARS
            reason = reason[:MAX_FLAG_REASON_CHARS] + f" [... {cut} more characters]"
        return ToolResult("flagged for a person; the run stops here", flag=reason)

    # -- commands ----------------------------------------------------------------------

    def _run(self, args: Mapping[str, Any]) -> ToolResult:
        argv = self.policy.check_command(args["command"])
        timeout = self.constraints.command_timeout_s
        try:
            proc = run_process(
                argv,
                cwd=self.workdir,
                timeout_s=timeout,
                env=self._env,
                max_output_bytes=self.constraints.max_output_bytes,
                deadline=self.deadline,
                sandbox=self.sandbox,
            )
        except FileNotFoundError:
            raise ToolError(f"command not found: {argv[0]}") from None
        except PermissionError:
            raise ToolError(f"not executable: {argv[0]}") from None
        shown = shlex.join(argv)
        if proc.timed_out:
            return ToolResult(
                f"$ {shown}\ntimed out after {proc.duration_s:.1f}s; the command and every "
                f"process it started were killed\n{proc.output}",
                is_error=True,
            )
        return ToolResult(f"$ {shown}\nexit code {proc.exit_code}\n{proc.output}")
