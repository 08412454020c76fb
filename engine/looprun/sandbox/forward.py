"""Inside an agent CLI's network namespace: relay one loopback port to the engine's bridge.

Started as a script by the bubblewrap wrapper (``python -I -S forward.py SOCKET PORT --
ARGV...``), standard library only. It listens on ``127.0.0.1:PORT`` in the namespace,
forks a relay that joins each accepted stream to the Unix socket ``SOCKET`` (bound in
from the engine's ``bridge.py``), then becomes the command. When the command exits,
the namespace's init exits and the kernel ends the relay with everything else.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

_CHUNK = 65536


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy one direction of a stream until its end, then pass the end on (the engine's
    bridge relays the same way)."""
    try:
        while data := src.recv(_CHUNK):
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def relay(client: socket.socket, upstream: socket.socket) -> None:
    """Both directions between two connected streams, until both have ended."""
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()


def _join(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
        relay(client, upstream)
    except OSError:
        pass
    finally:
        client.close()
        upstream.close()


def _relay(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no batching delay
        threading.Thread(target=_join, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: forward.py SOCKET PORT -- ARGV...", file=sys.stderr)
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() == 0:
        try:
            os.setsid()  # out of the command's process group: its signals are its own
            _relay(listener, path)
        finally:
            os._exit(0)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"looprun: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
