"""A small version of benchmarks/kill_resume.py: the invoice bugfix killed with SIGKILL
at random moments (a fixed seed), resumed through the real CLI, ends exactly as the
uninterrupted run (outcome, iterations, every file's content)."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "kill_resume.py"


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("kill_resume", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kill_resume"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.e2e
def test_random_kills_of_the_bugfix_sample_resume_to_the_uninterrupted_result(
    tmp_path: Path,
) -> None:
    kr = _bench()
    scenario = kr.SCENARIOS["bugfix"]
    ref, took = kr.reference(scenario, tmp_path / "ref")
    assert (ref.outcome, ref.iterations) == ("done", 3)
    rng = random.Random(15)
    kills = 0
    for n in range(6):
        if kills == 2:
            break
        out = kr.kill_and_resume(scenario, rng.uniform(0.2, took * 0.9), tmp_path / f"t{n}", ref)
        if out is None:  # the run ended before the kill
            continue
        ok, detail = out
        assert ok, detail
        kills += 1
    assert kills == 2
