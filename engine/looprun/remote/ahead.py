"""Joining the cluster ahead of the first sub-loop.

Importing Ray, joining the cluster and making the run's board take a second or more;
the driver has work of its own before it dispatches its first sub-loop (the run's
setup, its baseline, its plan). ``Ahead`` does the first while the driver does the
second, on a thread of its own, and hands over what it made, or what went wrong, at the
point where the executor would have done it itself: a cluster that cannot be reached
stops the run there, as before, and a Ctrl-C meanwhile stops the run as any other.
"""

from __future__ import annotations

import threading
from typing import Any

from looprun.remote.ray_cluster import connect, new_board


class Ahead:
    """The join (``connect``) of the cluster at ``address``, then a board there, started
    at once on a daemon thread. ``joined`` and ``board`` wait for each and raise what it
    raised; each is handed over once."""

    def __init__(self, address: str, join_timeout_s: float) -> None:
        self._address, self._join_timeout_s = address, join_timeout_s
        self._joined, self._boarded = threading.Event(), threading.Event()
        self._ray: Any = None
        self._board: Any = None
        self._join_error: BaseException | None = None
        self._board_error: BaseException | None = None
        thread = threading.Thread(target=self._work, name="looprun-ray-ahead", daemon=True)
        thread.start()

    def _work(self) -> None:
        try:
            self._ray = connect(self._address, join_timeout_s=self._join_timeout_s)
        except BaseException as exc:  # handed to the driver's thread by ``joined``
            self._join_error = exc
            self._joined.set()
            self._boarded.set()
            return
        self._joined.set()
        try:
            self._board = new_board(self._ray)
        except BaseException as exc:  # handed over by ``board``
            self._board_error = exc
        self._boarded.set()

    def joined(self) -> Any:
        """The ``ray`` module, joined (waits for the join; ``connect`` bounds it)."""
        self._joined.wait()
        if self._join_error is not None:
            raise self._join_error
        return self._ray

    def board(self) -> Any:
        """The board made after joining: asked only once ``joined`` returned."""
        self._boarded.wait()
        if self._board_error is not None:
            raise self._board_error
        return self._board
