"""The entry-point path of the registry, with the sample plugin made discoverable the way
an installed distribution is: a ``*.dist-info`` with ``entry_points.txt`` on sys.path."""

from __future__ import annotations

from pathlib import Path

import pytest
from observe_helpers import REPO

from looprun.observe import registry
from looprun.observe.base import ParseInput


@pytest.fixture
def installed_tap(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "looprun_tap-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: looprun-tap\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[looprun.parsers]\ntap = looprun_tap:TapParser\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(REPO / "samples" / "parser_plugin" / "src"))
    registry._entry_points.cache_clear()
    yield
    registry._entry_points.cache_clear()


def test_plugin_parser_is_found_and_works(installed_tap, tmp_path: Path):
    assert "tap" in registry.parser_names()
    parser = registry.get_parser("tap")
    out = "TAP version 13\n1..3\nok 1 - adds\nnot ok 2 - divides\nok 3 - skipped # SKIP slow\n"
    obs = parser.parse(ParseInput(workdir=tmp_path, output=out, exit_code=1))
    assert not obs.ok and obs.counts["failed"] == 1 and obs.facts["failing"] == ["divides"]
    assert "divides" in obs.feedback


def test_unknown_parser_is_a_clear_error():
    with pytest.raises(registry.UnknownParser, match="unknown parser 'nope'"):
        registry.get_parser("nope")
