"""An agent CLI's turn in the run's sandbox, with its model server as the one way out.

The CLI's own tools run whatever the model asks (its shell runs the repository's tests),
so it gets what the run's commands get - the working tree writable, ``.git`` and the state
read-only, credential stores hidden, a private ``/proc`` - plus its own home writable, and,
unless the template allows network, no network but a bridge to the pinned server:

- a plain-HTTP server (``http://host:port/...``, a local or self-hosted one): the CLI is
  pointed at ``http://127.0.0.1:PORT/...``, every stream there is joined to that server;
- an HTTPS server (the provider's own, or a pinned ``https://`` one): the CLI keeps its
  URL and is given ``HTTPS_PROXY=http://127.0.0.1:PORT``; only a ``CONNECT`` to that host
  (or, with none pinned, to the CLI's provider hosts) is joined, so TLS runs end to end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from looprun.errors import LooprunError
from looprun.sandbox import Sandbox
from looprun.sandbox.base import Way
from looprun.sandbox.bridge import ModelBridge

_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
_INNER_PORT = 18443  # inside a namespace of its own any port is free; for servers on < 1024


def pinned_server(names: Sequence[str], env: Mapping[str, str]) -> str:
    """The server the user named for this CLI (the first of its variables that is set)."""
    return next((env[name] for name in names if env.get(name)), "")


def _host_port(url: str, where: str) -> tuple[str, int, str]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LooprunError(f"{where}: {url!r} is not an http(s) URL of a model server")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise LooprunError(f"{where}: {url!r} has a bad port") from exc
    return parts.hostname.lower(), port, parts.scheme


@contextmanager
def confined(
    sandbox: Sandbox | None,
    *,
    workdir: Path,
    home: Path,
    names: Sequence[str],
    defaults: Sequence[str],
    env: Mapping[str, str],
) -> Iterator[tuple[Sandbox | None, dict[str, str]]]:
    """The sandbox for one turn and the variables that point the CLI through its way out
    (for its adapter to read: ``names`` rewritten where the server is plain HTTP, the
    proxy variables where it is HTTPS); ``(None, {})`` when commands run unconfined."""
    if sandbox is None:
        yield None, {}
        return
    base = sandbox.confinement
    own = dataclasses.replace(base, writable=(workdir, home))
    if base.network:  # the template lets commands reach the network: the CLI too
        yield _with(sandbox, own), {}
        return
    url = pinned_server(names, env)
    where = next((n for n in names if env.get(n)), "the model server")
    unix = sandbox.private_network
    if url and urlsplit(url).scheme == "http":
        host, port, _ = _host_port(url, where)
        with ModelBridge([(host, port)], tunnel=False, unix=unix) as bridge:
            inner = bridge.port or (port if port >= 1024 else _INNER_PORT)
            parts = urlsplit(url)
            local = urlunsplit(("http", f"127.0.0.1:{inner}", *parts[2:]))
            out = {name: local for name in names if env.get(name)}
            out.update({name: "" for name in _PROXY_VARS})
            out["NO_PROXY"] = out["no_proxy"] = "*"
            yield _with(sandbox, own, Way(inner, bridge.socket_path)), out
        return
    servers = [url] if url else list(defaults)
    targets = [_host_port(s, where)[:2] for s in servers]
    with ModelBridge(targets, tunnel=True, unix=unix) as bridge:
        inner = bridge.port or _INNER_PORT
        proxy = f"http://127.0.0.1:{inner}"
        out = {name: proxy for name in _PROXY_VARS}
        out["NO_PROXY"] = out["no_proxy"] = ""
        yield _with(sandbox, own, Way(inner, bridge.socket_path)), out


def _with(sandbox: Sandbox, confinement: Any, way: Way | None = None) -> Sandbox:
    """The run's sandbox, bound to the CLI's confinement instead of the commands'."""
    if way is not None:
        confinement = dataclasses.replace(confinement, way_out=way)
    return dataclasses.replace(sandbox, confinement=confinement)  # type: ignore[type-var]
