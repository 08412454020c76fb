"""A real HTTP server on 127.0.0.1 that speaks the OpenAI Chat Completions and Anthropic
Messages wire formats, plays scripted responses and faults, and records every request.

Usage::

    with FakeProvider() as server:
        server.push(openai_reply(tool_calls=[("read_file", {"path": "a.py"})]))
        server.push(error(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}))
        model = resolve_model("openai:gpt-4o-mini", base_url=server.openai_url, env={})
        ...
        server.requests[0].json()            # what the client sent
        openai_request_problems(server.requests[0].json())   # [] when valid

Queued answers are played in order, whatever the path; when the queue is empty, the
``responder`` callable (if set) answers, else a 500 saying the script ran out.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# --- what the server answers ---------------------------------------------------------------


@dataclass(frozen=True)
class Canned:
    """One scripted answer. ``delay_s`` stalls before answering; ``cut_after`` sends only
    that many body bytes (with the full Content-Length) and drops the connection."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    cut_after: int | None = None


def _encode(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body).encode("utf-8")


def canned(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Canned:
    return Canned(status, _encode(body), dict(headers or {"content-type": "application/json"}))


error = canned  # error(429, {...}, {"Retry-After": "1"}) reads better in tests


def openai_error(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Canned:
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return canned(status, body, headers)


def anthropic_error(
    status: int, type_: str, message: str, headers: Mapping[str, str] | None = None
) -> Canned:
    body = {"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_fake"}
    return canned(status, body, headers)


def stall(seconds: float, then: Canned | None = None) -> Canned:
    """Answer only after ``seconds`` (a client with a shorter timeout gives up first)."""
    base = then or canned(200, {})
    return Canned(base.status, base.body, base.headers, delay_s=seconds)


def truncated_json(answer: Canned, keep: int | None = None) -> Canned:
    """A complete HTTP answer whose JSON body is cut short (Content-Length matches)."""
    keep = len(answer.body) // 2 if keep is None else keep
    return Canned(answer.status, answer.body[:keep], answer.headers)


def dropped_connection(answer: Canned, keep: int | None = None) -> Canned:
    """The connection closes part-way through the body (Content-Length promised more)."""
    keep = len(answer.body) // 2 if keep is None else keep
    return Canned(answer.status, answer.body, answer.headers, cut_after=keep)


_ids = itertools.count(1)
ToolCallSpec = tuple[str, Any]  # (name, arguments as dict, or as raw text to send verbatim)


def openai_reply(
    text: str | None = None,
    *,
    tool_calls: Sequence[ToolCallSpec] = (),
    finish: str | None = None,
    refusal: str | None = None,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    cached_tokens: int = 0,
    model: str = "gpt-4o-mini-2024-07-18",
) -> Canned:
    calls = [
        {
            "id": f"call_fake{next(_ids)}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
            },
        }
        for name, args in tool_calls
    ]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text,
        "refusal": refusal,
        "annotations": [],
    }
    if calls:
        message["tool_calls"] = calls
    body = {
        "id": f"chatcmpl-fake{next(_ids)}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish or ("tool_calls" if calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }
    return canned(200, body)


def anthropic_reply(
    text: str | None = None,
    *,
    tool_calls: Sequence[ToolCallSpec] = (),
    stop_reason: str | None = None,
    input_tokens: int = 100,
    output_tokens: int = 20,
    cache_read: int = 0,
    cache_write: int = 0,
    model: str = "claude-haiku-4-5-20251001",
) -> Canned:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for name, args in tool_calls:
        content.append(
            {"type": "tool_use", "id": f"toolu_fake{next(_ids)}", "name": name, "input": args}
        )
    body = {
        "model": model,
        "id": f"msg_fake{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
            "output_tokens": output_tokens,
            "service_tier": "standard",
        },
    }
    return canned(200, body)


# --- what the server saw -------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: Mapping[str, str]  # names lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Said:
    """One message of a conversation as a request carried it, in either wire format."""

    role: str  # system | user | assistant | tool
    text: str = ""
    calls: tuple[tuple[str, str, Any], ...] = ()  # (id, name, arguments)
    answers: str = ""  # role tool: the call id it answers
    is_error: bool = False


def conversation(body: Mapping[str, Any]) -> list[Said]:
    """The conversation in a Chat Completions or Messages request, provider-neutral, so a
    responder can decide what to answer from what was said so far."""
    out: list[Said] = []
    if isinstance(body.get("system"), str):
        out.append(Said("system", body["system"]))
    for m in body.get("messages") or []:
        role, content = m.get("role"), m.get("content")
        if not isinstance(content, list):  # Chat Completions
            if role == "tool":
                text = str(content or "")
                out.append(Said("tool", text, answers=m.get("tool_call_id") or ""))
                continue
            calls = tuple(
                (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
                for c in m.get("tool_calls") or []
            )
            out.append(Said(role, content or "", calls))
            continue
        texts, calls = [], []
        for block in content:  # Messages API blocks
            if block.get("type") == "text":
                texts.append(block.get("text") or "")
            elif block.get("type") == "tool_use":
                calls.append((block["id"], block["name"], block.get("input")))
            elif block.get("type") == "tool_result":
                result = block.get("content")
                if isinstance(result, list):
                    result = "".join(b.get("text", "") for b in result)
                out.append(
                    Said(
                        "tool",
                        str(result or ""),
                        answers=block.get("tool_use_id") or "",
                        is_error=bool(block.get("is_error")),
                    )
                )
        if texts or calls:
            out.append(Said(role, "\n\n".join(texts), tuple(calls)))
    return out


# --- the server ----------------------------------------------------------------------------


class FakeProvider:
    """A threaded HTTP server on 127.0.0.1 (port chosen by the OS)."""

    def __init__(self, responder: Callable[[Recorded], Canned] | None = None):
        self.responder = responder
        self.requests: list[Recorded] = []
        self._queue: list[Canned] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def openai_url(self) -> str:
        """The base URL an openai-compatible client is given (it appends /chat/completions)."""
        return self.url + "/v1"

    def push(self, *answers: Canned) -> None:
        with self._lock:
            self._queue.extend(answers)

    def extend(self, answers: Iterable[Canned]) -> None:
        self.push(*answers)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _next(self, request: Recorded) -> Canned:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.pop(0)
        if self.responder is not None:
            return self.responder(request)
        return canned(500, {"error": {"message": "fake provider: no scripted answer left"}})

    def start(self) -> FakeProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in separate writes: without this, Nagle's
                # algorithm and delayed ACKs add ~40 ms to every answer.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                answer = provider._next(Recorded("POST", self.path, headers, body))
                if answer.delay_s and provider._stopping.wait(answer.delay_s):
                    return
                try:
                    self.send_response(answer.status)
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(answer.body)))
                    if answer.cut_after is not None:
                        self.send_header("connection", "close")
                    self.end_headers()
                    if answer.cut_after is not None:
                        self.wfile.write(answer.body[: answer.cut_after])
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- request validators: what the providers' API references require ------------------------


def openai_request_problems(body: Any) -> list[str]:
    """Problems with a Chat Completions request body; [] when it is valid."""
    problems: list[str] = []
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model missing")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages missing or empty"]
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            problems.append(f"messages[{i}]: bad role {role!r}")
            continue
        if role == "tool":
            if m.get("tool_call_id") not in open_calls:
                problems.append(
                    f"messages[{i}]: tool result {m.get('tool_call_id')!r} "
                    "answers no call of the preceding assistant message"
                )
            open_calls.discard(m.get("tool_call_id"))
            if not isinstance(m.get("content"), str):
                problems.append(f"messages[{i}]: tool content must be a string")
            continue
        if open_calls:
            problems.append(f"messages[{i}]: calls {sorted(open_calls)} left without results")
            open_calls = set()
        content = m.get("content")
        if role == "assistant" and m.get("tool_calls"):
            if content is not None and not isinstance(content, str):
                problems.append(f"messages[{i}]: content must be a string or null")
            for call in m["tool_calls"]:
                fn = call.get("function") or {}
                if call.get("type") != "function" or not call.get("id") or not fn.get("name"):
                    problems.append(f"messages[{i}]: malformed tool call {call!r}")
                    continue
                try:
                    args = json.loads(fn.get("arguments"))
                except (TypeError, ValueError):
                    args = None
                if not isinstance(args, dict):
                    problems.append(f"messages[{i}]: call {call['id']} arguments not a JSON object")
                open_calls.add(call["id"])
        elif not isinstance(content, str):
            problems.append(f"messages[{i}]: content must be a string")
    if open_calls:
        problems.append(f"calls {sorted(open_calls)} left without results at the end")
    for t in body.get("tools") or []:
        fn = t.get("function") or {}
        if (
            t.get("type") != "function"
            or not fn.get("name")
            or not isinstance(fn.get("parameters"), dict)
        ):
            problems.append(f"malformed tool {t!r}")
    return problems


def anthropic_request_problems(body: Any, headers: Mapping[str, str] | None = None) -> list[str]:
    """Problems with a Messages API request (body and headers); [] when it is valid."""
    problems: list[str] = []
    if headers is not None:
        if not headers.get("anthropic-version"):
            problems.append("anthropic-version header missing")
        if "application/json" not in headers.get("content-type", ""):
            problems.append("content-type is not application/json")
        if "authorization" in headers:
            problems.append("the Messages API takes x-api-key, not authorization")
    if not isinstance(body, dict):
        return [*problems, "body is not a JSON object"]
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        problems.append("max_tokens missing (it is required)")
    if "system" in body and not isinstance(body["system"], str | list):
        problems.append("system must be a string or a list of blocks")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages missing or empty"]
    previous_uses: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        expected = "user" if i % 2 == 0 else "assistant"
        if role != expected:
            problems.append(f"messages[{i}]: role {role!r}, expected {expected!r} (alternation)")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            problems.append(f"messages[{i}]: empty content")
            continue
        uses: set[str] = set()
        answered: set[str] = set()
        seen_other = False
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and not str(block.get("text") or "").strip():
                problems.append(f"messages[{i}]: empty text block")
            if kind == "tool_use":
                if role != "assistant":
                    problems.append(f"messages[{i}]: tool_use outside an assistant turn")
                if (
                    not block.get("id")
                    or not block.get("name")
                    or not isinstance(block.get("input"), dict)
                ):
                    problems.append(f"messages[{i}]: malformed tool_use {block!r}")
                uses.add(block.get("id"))
            elif kind == "tool_result":
                if role != "user":
                    problems.append(f"messages[{i}]: tool_result outside a user turn")
                if seen_other:
                    problems.append(f"messages[{i}]: tool_result after other content")
                if block.get("tool_use_id") not in previous_uses:
                    problems.append(
                        f"messages[{i}]: tool_result {block.get('tool_use_id')!r} "
                        "has no tool_use in the previous turn"
                    )
                answered.add(block.get("tool_use_id"))
            else:
                seen_other = True
        if role == "user" and previous_uses - answered:
            problems.append(
                f"messages[{i}]: tool_use {sorted(previous_uses - answered)} not answered"
            )
        previous_uses = uses if role == "assistant" else set()
    if previous_uses:
        problems.append("the last assistant turn has unanswered tool_use blocks")
    for t in body.get("tools") or []:
        if not t.get("name") or not isinstance(t.get("input_schema"), dict):
            problems.append(f"malformed tool {t!r}")
    return problems
