"""The watchdog of remote sub-loops: by default the longest step a sub-template allows
by its own timeouts, capped by the sub-loop's time share; the environment overrides it."""

from __future__ import annotations

from pathlib import Path

from remote_helpers import STEPS

from looprun.remote.watchdog import MODEL_CALL_S, PUSH_S, default_watchdog, step_bound
from looprun.template.loader import load_template

SLOW_CHECK = STEPS.replace(
    'third: {run: "test -f c.txt", parser: exit_code}',
    'third: {run: "test -f c.txt", parser: exit_code, timeout: 45}',
).replace("  max_steps: 3\n", "  max_steps: 2\n  constraints: {command_timeout: 30}\n")


def _template(tmp: Path, text: str) -> str:
    path = tmp / "steps.yaml"
    path.write_text(text)
    return str(path)


def test_a_step_is_bounded_by_its_act_turn_and_checks(tmp_path: Path) -> None:
    ref = _template(tmp_path, SLOW_CHECK)
    bound = 2 * (MODEL_CALL_S + 30) + 45 + PUSH_S
    assert step_bound(load_template(ref)) == bound
    assert default_watchdog(ref, {}) == bound
    assert default_watchdog(ref, {"timeout_s": None}) == bound


def test_the_time_share_caps_the_watchdog(tmp_path: Path) -> None:
    ref = _template(tmp_path, SLOW_CHECK)
    assert default_watchdog(ref, {"timeout_s": 100.0}) == 100.0 + PUSH_S
