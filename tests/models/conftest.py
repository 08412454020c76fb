from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.support.fake_provider import FakeProvider


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with FakeProvider() as running:
        yield running


class Recorder:
    """Collects retry events and backoff sleeps (so tests observe waits without waiting)."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.sleeps: list[float] = []

    def event(self, event: dict) -> None:
        self.events.append(event)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
