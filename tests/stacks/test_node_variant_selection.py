"""How held-out variants are selected with node's own runner, without node: a whole file
at the triage, then the kept tests' files and one anchored name pattern whose regex
characters are escaped."""

from __future__ import annotations

import pytest

from looprun.checks.runner import _selection
from looprun.checks.stacks import node_select


def test_kept_ids_become_an_anchored_escaped_name_pattern_then_their_files() -> None:
    ids = ("test/h.test.js::pads 9 (s) to 0:09", "test/h.test.js::a|b.*", "test/x.test.js::c")
    assert node_select.select(ids) == (
        "--test-name-pattern=^(?:pads 9 \\(s\\) to 0:09|a\\|b\\.\\*|c)$",
        "test/h.test.js",
        "test/x.test.js",
    )


def test_a_bare_path_selects_the_whole_file() -> None:
    assert node_select.select(("test/heldout_variants.test.js",)) == (
        "test/heldout_variants.test.js",
    )


@pytest.mark.parametrize(
    "bad",
    [
        (),
        ("test/h.test.js::suite::name",),  # a name pattern cannot single out a suite's test
        ("::name",),
        ("-r::x",),  # never an option
        ("test/h.test.js", "test/h.test.js::a"),  # a whole file and one test
    ],
)
def test_what_cannot_be_selected_exactly_is_refused(bad: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        node_select.select(bad)
    if bad:
        assert _selection("node", bad) is None
