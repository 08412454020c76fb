"""One way to keep secrets out of text and data: every known secret value is replaced,
longest first (so a secret that contains another is never half-replaced). Text that
cannot be written as UTF-8 (lone surrogates: a JSON ``\\ud800`` from a model, a file
name with invalid bytes) is escaped on the way, so every writer can encode it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

REDACTED = "[REDACTED]"
SURROGATE = re.compile(r"[\ud800-\udfff]")
# Environment variable names that look like credentials: keys, tokens, passwords, and
# header lists (``OTEL_EXPORTER_OTLP_HEADERS`` and its per-signal forms carry the
# collector's ``authorization=Bearer ...``).
SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|HEADERS)",
    re.IGNORECASE,
)
# A URL with userinfo (``http://user:pass@proxy:3128``, ``postgres://u:p@db/x``): a
# credential whatever the variable is called (HTTPS_PROXY, DATABASE_URL, ...).
USERINFO_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?P<user>[^/@\s:]*)(?::(?P<pw>[^/@\s]*))?@")
_HEADERS_NAME = re.compile(r"HEADERS$", re.IGNORECASE)


def is_secret(name: str, value: str = "") -> bool:
    """Whether a variable carries a credential, by its name or by what its value is:
    such a variable is kept from every command a run starts."""
    return bool(SECRET_NAME.search(name) or USERINFO_URL.search(value))


def secret_parts(name: str, value: str) -> list[str]:
    """The pieces of a secret variable's value that must never be shown: the value, and
    the parts a command could print alone (a URL's userinfo and password, each header
    value of a header list and the token after its scheme)."""
    parts = [value]
    for m in USERINFO_URL.finditer(value):
        user, pw = m.group("user"), m.group("pw")
        parts += [f"{user}:{pw}" if pw is not None else user, pw or "", unquote(pw or "")]
    if _HEADERS_NAME.search(name):
        for item in value.split(","):
            _, eq, header = item.partition("=")
            if not eq:
                continue
            for text in (header.strip(), unquote(header.strip())):
                parts += [text, text.split()[-1] if text.split() else ""]
    return [p for p in parts if p]


def secret_values(base: Mapping[str, str] | None = None, min_len: int = 8) -> list[str]:
    """Values (and parts of values) of secret variables, longest first, for redaction."""
    env = os.environ if base is None else base
    values = {
        part
        for k, v in env.items()
        if is_secret(k, v)
        for part in secret_parts(k, v)
        if len(part) >= min_len
    }
    return sorted(values, key=len, reverse=True)


def escape_surrogates(s: str) -> str:
    """Lone surrogates as the visible text ``\\udXXX``; other text unchanged."""
    if s.isascii() or SURROGATE.search(s) is None:  # isascii: a flag, not a scan
        return s
    return SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", s)


class Redactor:
    """Replaces secret values in strings, and recursively through plain data."""

    def __init__(self, values: Iterable[str], *, marker: str = REDACTED, min_len: int = 1):
        self.values = sorted({v for v in values if v and len(v) >= min_len}, key=len, reverse=True)
        self.marker = marker

    def text(self, s: str) -> str:
        s = escape_surrogates(s)
        for v in self.values:
            if v in s:
                s = s.replace(v, self.marker)
        return s

    __call__ = text

    def binary(self, b: bytes) -> bytes:
        """``b`` with every secret's UTF-8 bytes replaced: a kept file stays byte-exact
        (binary or not) except where a secret was."""
        for v in self.values:
            raw = v.encode("utf-8", "surrogatepass")
            if raw in b:
                b = b.replace(raw, self.marker.encode())
        return b

    def data(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            return {self.text(str(k)): self.data(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.data(v) for v in obj]
        return obj

    def __repr__(self) -> str:  # never the values themselves
        return f"Redactor({len(self.values)} secrets)"
