"""The baseline comparisons when a parametrized test's ids change between runs."""

from __future__ import annotations

from looprun.loop.baseline import compare, parametrized, unstable_ids

_BASE = {
    "passing": ["t.py::f[a-b]", "t.py::f[a-c]", "t.py::g[x]", "t.py::h"],
    "failing": ["t.py::f[b-c]"],
}


def test_ids_two_runs_disagree_on_are_unstable() -> None:
    again = {"passing": ["t.py::f[b-a]", "t.py::f[a-c]", "t.py::g[x]", "t.py::h"],
             "failing": ["t.py::f[b-c]"]}  # fmt: skip
    assert unstable_ids(_BASE, again) == ["t.py::f[a-b]", "t.py::f[b-a]"]
    assert parametrized(_BASE) and not parametrized({"passing": ["t.py::h"], "failing": []})


def test_a_renamed_case_of_an_unstable_function_neither_vanishes_nor_newly_fails() -> None:
    base = {**_BASE, "unstable": ["t.py::f[a-b]", "t.py::f[b-a]"]}
    now = {"passing": ["t.py::f[b-a]", "t.py::f[a-c]", "t.py::g[x]", "t.py::h"],
           "failing": ["t.py::f[c-b]"]}  # fmt: skip
    assert compare(base, now) == {"newly_failing": [], "regressed": [], "vanished": []}


def test_a_rename_in_a_stable_function_and_a_dropped_case_still_vanish() -> None:
    base = {**_BASE, "unstable": ["t.py::f[a-b]", "t.py::f[b-a]"]}
    # g was stable at the baseline: its renamed case is a vanished one; f lost a case
    now = {"passing": ["t.py::f[b-a]", "t.py::g[y]", "t.py::h"], "failing": ["t.py::f[c-b]"]}
    assert compare(base, now)["vanished"] == ["t.py::f[a-c]", "t.py::g[x]"]


def test_a_renamed_pass_that_fails_now_is_a_regression() -> None:
    base = {**_BASE, "unstable": ["t.py::f[a-b]"]}
    now = {"passing": ["t.py::f[a-c]", "t.py::g[x]", "t.py::h"],
           "failing": ["t.py::f[b-c]", "t.py::f[b-a]"]}  # fmt: skip
    assert compare(base, now) == {
        "newly_failing": ["t.py::f[b-a]"],
        "regressed": ["t.py::f[b-a]"],
        "vanished": [],
    }


def test_without_unstable_ids_the_comparison_is_by_exact_id() -> None:
    now = {"passing": ["t.py::f[b-a]", "t.py::f[a-c]", "t.py::g[x]", "t.py::h"],
           "failing": ["t.py::f[c-b]"]}  # fmt: skip
    assert compare(_BASE, now) == {
        "newly_failing": ["t.py::f[c-b]"],
        "regressed": [],
        "vanished": ["t.py::f[a-b]"],
    }
