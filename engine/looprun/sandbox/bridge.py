"""The one way out of an agent CLI's sandbox: the engine's end of the path to its model server.

The CLI runs without network (bubblewrap: a network namespace of its own; Landlock: TCP
connect to one port only). Its model server is reached through this bridge, which the
engine runs for the length of one turn: it listens on a Unix socket in a directory of its
own (bubblewrap binds nothing else in; ``forward.py`` relays the CLI's loopback port to
it) or on a loopback TCP port (Landlock), and joins each accepted stream to the pinned
server and nothing else.

``direct``: every stream goes to the one server (a plain-HTTP server the CLI is pointed at
through the bridge). ``tunnel``: each stream must open with ``CONNECT host:port``, the
way a client speaks to an HTTPS proxy; only the pinned servers are joined, so TLS runs
end to end between the CLI and its provider and the bridge never sees the key.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from looprun.sandbox.forward import relay

_HEAD_CAP = 8192  # a CONNECT request head longer than this is refused


class ModelBridge:
    """Listens for the CLI's streams and joins each one to an allowed server."""

    def __init__(self, targets: Iterable[tuple[str, int]], *, tunnel: bool, unix: bool):
        self.targets = frozenset((host.lower(), port) for host, port in targets)
        self.tunnel = tunnel
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.dir: Path | None = None
        self.socket_path: Path | None = None
        self.port = 0
        if unix:
            self.dir = Path(tempfile.mkdtemp(prefix="looprun-bridge-")).resolve()
            self.socket_path = self.dir / "model.sock"
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(self.socket_path))
        else:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", 0))
            self.port = listener.getsockname()[1]
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, name="looprun-bridge", daemon=True).start()

    def close(self) -> None:
        """Stop listening and cut every stream still open (the turn is over)."""
        with self._lock:
            self._closed = True
            streams = list(self._open)
            self._open.clear()
        for sock in (self._listener, *streams):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ModelBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _keep(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._closed:
                sock.close()
                return False
            self._open.add(sock)
            return True

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if client.family == socket.AF_INET:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not self._keep(client):
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        try:
            rest = b""
            if self.tunnel:
                target, rest = _connect_target(client)
                if target is None or target not in self.targets:
                    client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                    return
            else:
                (target,) = self.targets
            try:
                upstream = socket.create_connection(target, timeout=30)
                upstream.settimeout(None)
                # a relay passes on what it gets at once (a streamed reply's events)
                upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                if self.tunnel:
                    client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            if not self._keep(upstream):
                return
            if self.tunnel:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            relay(client, upstream)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with self._lock:
                        self._open.discard(sock)
                    sock.close()


def _connect_target(client: socket.socket) -> tuple[tuple[str, int] | None, bytes]:
    """The ``host:port`` of a ``CONNECT`` request head (None for anything else) and the
    bytes that came after the head."""
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(1024)
        if not chunk or len(head) + len(chunk) > _HEAD_CAP:
            return None, b""
        head += chunk
    head, _, rest = head.partition(b"\r\n\r\n")
    parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(parts) != 3 or parts[0] != "CONNECT":
        return None, b""
    host, sep, port = parts[1].rpartition(":")
    if not sep or not port.isdigit():
        return None, b""
    return (host.strip("[]").lower(), int(port)), rest
