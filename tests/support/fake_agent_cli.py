"""A stand-in agent CLI for the default suite: installed on PATH as ``claude`` or ``codex``
by ``install``, it behaves as FAKE_AGENT_MODE says, and logs how it was started.

Modes (separated by "|", in order):
  write:PATH=TEXT   write TEXT to PATH (relative to the working directory); {prompt} in
                    PATH stands for the turn's prompt (the last argument), stripped
  stdin             read standard input to its end first (an open one would hang here)
  hang              start a child in the same process group, then sleep for ever
  exit:N            exit with status N without a final report
  usage:IN/OUT      report IN prompt and OUT completion tokens (codex: running totals)
  leak              print the value of the CLI's API key variable
  deny:TEXT         report a denied tool call
  escape            do what a hostile model's shell command would, and print what worked
                    as ``ESCAPE {json}``: write FAKE_ESCAPE_FILE, connect to
                    127.0.0.1:FAKE_ESCAPE_PORT, look for looprun in /proc, and fetch
                    ``/probe`` from the server its FAKE_ESCAPE_URL_VAR names (and read
                    FAKE_ESCAPE_READ when set)
Without exit:N it prints the CLI's own final report (Claude Code stream-json, or Codex
JSONL) and exits 0. FAKE_AGENT_LOG names a JSON-lines file where each start is logged:
argv, cwd, whether stdin is /dev/null, HOME, the environment's variable names.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def install(bindir: Path, program: str) -> Path:
    """Put the fake on PATH as ``program`` (run by this interpreter)."""
    bindir.mkdir(parents=True, exist_ok=True)
    exe = bindir / program
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
    exe.chmod(0o755)
    return exe


def _stdin_is_devnull() -> bool:
    try:
        return os.path.samestat(os.fstat(0), os.stat(os.devnull))
    except OSError:
        return False


def main() -> int:
    program = Path(sys.argv[0]).name
    is_codex = "codex" in os.environ.get("FAKE_AGENT_AS", "") or "exec" in sys.argv[1:2]
    log = os.environ.get("FAKE_AGENT_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            entry = {
                "argv": sys.argv[1:],
                "program": program,
                "cwd": os.getcwd(),
                "stdin_devnull": _stdin_is_devnull(),
                "home": os.environ.get("HOME"),
                "env": sorted(os.environ),
                "pid": os.getpid(),
            }
            fh.write(json.dumps(entry) + "\n")
    tokens = (100, 20)
    tools: list[str] = []
    denied: list[str] = []
    key_var = "OPENAI_API_KEY" if is_codex else "ANTHROPIC_API_KEY"
    for mode in filter(None, os.environ.get("FAKE_AGENT_MODE", "").split("|")):
        name, _, arg = mode.partition(":")
        if name == "write":
            path, _, text = arg.partition("=")
            path = path.replace("{prompt}", sys.argv[-1].strip())
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text.replace("\\n", "\n"), encoding="utf-8")
            tools.append("Write")
        elif name == "stdin":
            sys.stdin.read()
        elif name == "hang":
            child = subprocess.Popen(["sleep", "300"])
            if log:
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"child": child.pid}) + "\n")
            time.sleep(300)
        elif name == "exit":
            print("fatal: something went wrong", file=sys.stderr)
            return int(arg)
        elif name == "usage":
            i, _, o = arg.partition("/")
            tokens = (int(i), int(o))
        elif name == "leak":
            print(f"debug: key is {os.environ.get(key_var, '')}")
        elif name == "deny":
            denied.append(arg)
        elif name == "escape":
            print("ESCAPE " + json.dumps(_escape()), flush=True)
    if is_codex:
        _codex_report(tokens, tools, denied)
    else:
        _claude_report(tokens, tools, denied)
    return 0


def _escape() -> dict[str, object]:
    """What an attacker's command gets done from inside the CLI's process."""
    found: dict[str, object] = {}
    try:
        Path(os.environ["FAKE_ESCAPE_FILE"]).write_text("escaped", encoding="utf-8")
        found["wrote_outside"] = True
    except OSError as exc:
        found["wrote_outside"] = f"no: {exc.strerror}"
    try:
        with socket.create_connection(("127.0.0.1", int(os.environ["FAKE_ESCAPE_PORT"])), 3):
            found["other_port"] = True
    except OSError as exc:
        found["other_port"] = f"no: {exc}"
    found["sees_looprun"] = any(_runs_looprun(p) for p in os.listdir("/proc") if p.isdigit())
    if secret := os.environ.get("FAKE_ESCAPE_READ"):
        try:
            found["read"] = Path(secret).read_text(encoding="utf-8")
        except OSError as exc:
            found["read"] = f"no: {exc.strerror}"
    url = os.environ.get(os.environ.get("FAKE_ESCAPE_URL_VAR", ""), "")
    proxy = os.environ.get("HTTPS_PROXY", "")
    if proxy:  # an HTTPS server: through the proxy it was given, by CONNECT
        server = url.split("://", 1)[1].split("/", 1)[0]
        other = f"127.0.0.1:{os.environ['FAKE_ESCAPE_PORT']}"
        found["tunnel"] = _tunnel(proxy, server, True)
        found["tunnel_elsewhere"] = _tunnel(proxy, other, False)
        return found
    try:
        with urllib.request.urlopen(url + "/probe", timeout=5) as reply:
            found["model_server"] = reply.read().decode()
    except (OSError, ValueError) as exc:
        found["model_server"] = f"no: {exc}"
    return found


def _tunnel(proxy: str, target: str, fetch: bool) -> str:
    """CONNECT to ``target`` through ``proxy``: its status line, and then (``fetch``) what
    a plain GET of ``/probe`` through the tunnel answers."""
    host, port = proxy.split("://", 1)[1].rstrip("/").rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), 5) as sock:
            sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            status = sock.recv(4096).decode().split("\r\n", 1)[0]
            if not fetch or " 200 " not in status:
                return status
            sock.sendall(f"GET /probe HTTP/1.0\r\nHost: {target}\r\n\r\n".encode())
            reply = b""
            while chunk := sock.recv(4096):
                reply += chunk
            return reply.decode().rsplit("\r\n\r\n", 1)[-1]
    except OSError as exc:
        return f"no: {exc}"


def _runs_looprun(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"-m\0looprun\0" in fh.read()
    except OSError:
        return False


def _claude_report(tokens: tuple[int, int], tools: list[str], denied: list[str]) -> None:
    sid = "00000000-0000-4000-8000-000000000001"
    if "--resume" in sys.argv:
        sid = sys.argv[sys.argv.index("--resume") + 1]
    elif "--session-id" in sys.argv:
        sid = sys.argv[sys.argv.index("--session-id") + 1]
    print(json.dumps({"type": "system", "subtype": "init", "session_id": sid, "model": "fake"}))
    content = [
        {"type": "tool_use", "id": f"t{i}", "name": t, "input": {}} for i, t in enumerate(tools)
    ]
    print(json.dumps({"type": "assistant", "session_id": sid, "message": {"content": content}}))
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": len(tools) + 1,
        "result": "All done, the bug is fixed.",
        "session_id": sid,
        "total_cost_usd": 0.01,
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
        "permission_denials": [
            {"tool_name": "Bash", "tool_use_id": "x", "tool_input": {"command": d}} for d in denied
        ],
        "terminal_reason": "completed",
    }
    print(json.dumps(result))


def _codex_report(tokens: tuple[int, int], tools: list[str], denied: list[str]) -> None:
    tid = "thread-fake-1"
    if "resume" in sys.argv:
        tid = sys.argv[sys.argv.index("resume") + 1]
    print(json.dumps({"type": "thread.started", "thread_id": tid}))
    print(json.dumps({"type": "turn.started"}))
    for i, _ in enumerate(tools):
        item = {"id": f"i{i}", "type": "file_change", "status": "completed", "changes": []}
        print(json.dumps({"type": "item.completed", "item": item}))
    for d in denied:
        item = {"id": "d", "type": "command_execution", "command": d, "status": "declined"}
        print(json.dumps({"type": "item.completed", "item": item}))
    msg = {"id": "m", "type": "agent_message", "text": "Done."}
    print(json.dumps({"type": "item.completed", "item": msg}))
    usage = {"input_tokens": tokens[0], "cached_input_tokens": 0, "output_tokens": tokens[1]}
    print(json.dumps({"type": "turn.completed", "usage": usage}))


if __name__ == "__main__":
    sys.exit(main())
