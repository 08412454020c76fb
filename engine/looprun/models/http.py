"""JSON over HTTP for the provider clients: bounded retries with jittered exponential
backoff that honour ``Retry-After``, per-request timeouts, and errors a person can act on.

Retried: 429, 5xx (and 408/409), connection errors, timeouts, truncated or invalid JSON.
Not retried: 400, 401, 403, 404 and other 4xx; they raise ``ModelError`` naming the
model, the server and what the server said; a request too long for the model's context
raises ``ContextTooLong``. API keys never appear in messages, events or reprs.
"""

from __future__ import annotations

import email.utils
import json
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from looprun.errors import ContextTooLong, ModelError
from looprun.models.retry import RetryPolicy
from looprun.system.redact import Redactor

EventSink = Callable[[dict[str, Any]], None]

_RETRY_STATUS = frozenset({408, 409, 429})
_CONTEXT_PATTERN = re.compile(
    r"context[ _-]?length|context[ _-]?window|maximum context|prompt is too long|"
    r"too many tokens|reduce the length|exceeds? (the )?context|input length .* exceed|"
    r"input is too long|prompt too long",
    re.IGNORECASE,
)
_MAX_SERVER_TEXT = 400


def parse_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def describe_server(url: str) -> str:
    """The server as a person would name it: scheme, host, port and path, no secrets."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}".rstrip("/")


def _collapse(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_SERVER_TEXT else text[: _MAX_SERVER_TEXT - 3] + "..."


def server_error(body: bytes) -> tuple[str, str]:
    """(message, code-or-type) from an error body in any of the common shapes.

    OpenAI ``{"error": {"message", "type", "code"}}``, Anthropic ``{"type": "error",
    "error": {"type", "message"}}``, OpenRouter (``error.metadata.raw``), Ollama
    ``{"error": "..."}``, vLLM ``{"object": "error", "message"}``, or plain text.
    """
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return _collapse(text), ""
    if not isinstance(data, dict):
        return _collapse(text), ""
    error = data.get("error")
    if isinstance(error, str):
        return _collapse(error), ""
    if isinstance(error, dict):
        message = str(error.get("message") or "")
        metadata = error.get("metadata")
        if isinstance(metadata, dict) and metadata.get("raw"):
            message = f"{message}: {metadata['raw']}" if message else str(metadata["raw"])
        code = error.get("code") or error.get("type") or ""
        return _collapse(message or json.dumps(error)), str(code)
    for key in ("message", "detail"):
        if data.get(key):
            return _collapse(str(data[key])), str(data.get("type") or data.get("code") or "")
    return _collapse(text), ""


def is_context_error(status: int, message: str, code: str) -> bool:
    if status == 413:
        return True
    if status not in (400, 422):
        return False
    return code == "context_length_exceeded" or bool(_CONTEXT_PATTERN.search(message))


_HINTS = {
    401: "the API key was refused: check the variable {key_env}",
    403: "the API key may not use this model, or the account lacks access",
    404: "the model or endpoint was not found: check the model name and the base URL",
    400: "the server rejected the request",
    422: "the server rejected the request",
}


class JsonClient:
    """POSTs JSON to one provider endpoint, with the retry policy; never leaks the key.

    ``transport`` is passed to httpx (tests use a loopback server or httpx.MockTransport);
    ``sleep`` and ``rng`` may be injected so backoff can be observed without waiting.
    """

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        url: str,
        headers: Mapping[str, str],
        key_env: str = "",
        secrets: Sequence[str] = (),
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        on_event: EventSink | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ):
        self.provider = provider
        self.model = model
        self.url = url
        self.server = describe_server(url)
        self.policy = policy or RetryPolicy()
        self.key_env = key_env
        self._headers = dict(headers)
        self._redact = Redactor(
            [*secrets, *(v for v in headers.values() if len(v) >= 8)], marker="***", min_len=4
        )
        self._transport = transport
        self._on_event = on_event
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._client: httpx.Client | None = None

    def __repr__(self) -> str:
        return f"JsonClient({self.provider}:{self.model} at {self.server})"

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(transport=self._transport, follow_redirects=False)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _where(self) -> str:
        return f"{self.provider} model {self.model!r} at {self.server}"

    def _fail(self, status: int, body: bytes) -> ModelError:
        message, code = server_error(body)
        message = self._redact(message)
        said = f": {message}" if message else ""
        if is_context_error(status, message, code):
            return ContextTooLong(
                f"{self._where()}: the request is too long for the model's context "
                f"(HTTP {status}{said})"
            )
        hint = _HINTS.get(status, "the server refused the request").format(
            key_env=self.key_env or "holding the key"
        )
        return ModelError(f"{self._where()}: HTTP {status}{said} ({hint})")

    def _event(self, **fields: Any) -> None:
        if self._on_event is not None:
            self._on_event(
                {
                    "event": "model_retry",
                    "provider": self.provider,
                    "model": self.model,
                    "server": self.server,
                    **fields,
                }
            )

    def post(self, body: Mapping[str, Any], *, timeout_s: float | None = None) -> dict[str, Any]:
        """POST ``body``; return the decoded JSON object of a 2xx answer.

        ``timeout_s`` bounds the whole call, retries and waits included (the engine
        passes the time left in the run); each request is also bounded by the policy.
        """
        start = time.monotonic()
        deadline = start + timeout_s if timeout_s is not None else None
        # every request is redacted as a whole: a secret a test printed, quoted in feedback
        # or an attempt summary, never reaches the provider (nor does invalid Unicode)
        payload = json.dumps(self._redact.data(body), ensure_ascii=False).encode("utf-8")
        attempts = max(1, self.policy.max_attempts)
        last = ""
        for attempt in range(1, attempts + 1):
            per_request = self.policy.timeout_s
            if deadline is not None:
                per_request = min(per_request, max(0.1, deadline - time.monotonic()))
            retry_after: float | None = None
            try:
                response = self._http().post(
                    self.url,
                    content=payload,
                    headers={**self._headers, "content-type": "application/json"},
                    timeout=httpx.Timeout(per_request),
                )
                status = response.status_code
                content = response.content
            except httpx.TimeoutException:
                last = f"no answer within {per_request:.0f} s (timeout)"
            except httpx.TransportError as exc:
                last = f"connection failed: {self._redact(type(exc).__name__)}: " + self._redact(
                    _collapse(str(exc))
                )
            else:
                should_retry = response.headers.get("x-should-retry", "").lower()
                if 200 <= status < 300:
                    try:
                        data = json.loads(content)
                    except ValueError:
                        last = f"HTTP {status} with a truncated or invalid JSON body"
                    else:
                        if isinstance(data, dict):
                            return data
                        last = f"HTTP {status} with a JSON body that is not an object"
                elif should_retry == "false" or (
                    status not in _RETRY_STATUS and status < 500 and should_retry != "true"
                ):
                    raise self._fail(status, content)
                else:
                    message, _ = server_error(content)
                    last = (
                        f"HTTP {status}: {self._redact(message)}" if message else f"HTTP {status}"
                    )
                    retry_after = parse_retry_after(response.headers)
                    if retry_after is not None and retry_after > self.policy.retry_after_max_s:
                        raise ModelError(
                            f"{self._where()}: {last} (the server asks to wait "
                            f"{retry_after:.0f} s, more than the "
                            f"{self.policy.retry_after_max_s:.0f} s allowed: "
                            "try later, or raise retry.retry_after_max_s)"
                        )
            if attempt == attempts:
                break
            delay = (
                retry_after if retry_after is not None else self.policy.backoff(attempt, self._rng)
            )
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise ModelError(
                    f"{self._where()}: {last}; no time left to retry within the run's limit"
                )
            self._event(
                attempt=attempt, max_attempts=attempts, delay_s=round(delay, 3), reason=last
            )
            self._sleep(delay)
        raise ModelError(f"{self._where()}: gave up after {attempts} attempts; last: {last}")
