"""How the environment sets a Ray run's timeouts (with Ray installed: without it,
``--executor ray`` is refused before any setting is read)."""

from __future__ import annotations

import pytest

from looprun.errors import UsageError
from looprun.remote.ray_executor import RaySettings


def test_the_environment_sets_the_watchdog_and_head_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOOPRUN_RAY_WATCHDOG_S", "12")
    monkeypatch.setenv("LOOPRUN_RAY_HEAD_TIMEOUT_S", "2.5")
    settings = RaySettings.parse("ray")
    assert (settings.watchdog_s, settings.head_timeout_s, settings.grace_s) == (12, 2.5, 5.0)
    monkeypatch.setenv("LOOPRUN_RAY_WATCHDOG_S", "soon")
    with pytest.raises(UsageError, match="LOOPRUN_RAY_WATCHDOG_S=soon: expected a positive"):
        RaySettings.parse("ray")
    monkeypatch.setenv("LOOPRUN_RAY_WATCHDOG_S", "0")
    with pytest.raises(UsageError, match="LOOPRUN_RAY_WATCHDOG_S=0"):
        RaySettings.parse("ray")
