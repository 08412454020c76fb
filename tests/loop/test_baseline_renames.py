"""The baseline comparisons when a parametrized test's ids change between runs."""

from __future__ import annotations

from looprun.loop.baseline import (
    compare,
    param_files,
    parametrized,
    rerun_files,
    unlisted_files,
    unstable_ids,
)

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


def test_the_second_baseline_run_needs_only_the_files_with_parametrized_ids() -> None:
    """Only a parametrized id can be renamed by a rerun: the files holding one are rerun,
    and the ids of the others are not taken as missing from that second run."""
    first = {"passing": [*_BASE["passing"], "u.py::k", "v.py::m"], "failing": _BASE["failing"]}
    assert rerun_files(first, param_files(first)) == ("t.py",)
    again = {"passing": ["t.py::f[b-a]", "t.py::f[a-c]", "t.py::g[x]", "t.py::h"],
             "failing": ["t.py::f[b-c]"]}  # fmt: skip
    assert unstable_ids(first, again, within=("t.py",)) == ["t.py::f[a-b]", "t.py::f[b-a]"]
    # every file holds one, or an id names no file (a collection error): the whole command
    assert rerun_files(_BASE, param_files(_BASE)) == ()
    broken = {"passing": first["passing"], "failing": ["u.py"]}
    assert rerun_files(broken, param_files(broken)) == ()
    plain = {"passing": ["u.py::k"], "failing": []}
    assert rerun_files(plain, param_files(plain)) == ()


def test_only_a_file_with_an_id_the_list_does_not_name_runs_again() -> None:
    """Another process's list of the ids (nothing run) spares the second run of a file
    whose every id it names as the run did; a file with an id it renamed or left out
    runs again. An id only the list names (a skipped test) says nothing."""
    first = {"passing": [*_BASE["passing"], "u.py::k[1]"], "failing": _BASE["failing"]}
    alike = [*first["passing"], *first["failing"], "t.py::skipped", "u.py::k[2]"]
    assert unlisted_files(first, alike) == ()
    renamed = [i.replace("f[a-b]", "f[b-a]") for i in alike]
    assert unlisted_files(first, renamed) == ("t.py",)
    assert unlisted_files(first, [i for i in alike if i != "u.py::k[1]"]) == ("u.py",)
    # a list of some files only: the ids of the others are not missing from it
    assert unlisted_files(first, ["u.py::k[1]"], within=("u.py",)) == ()
    assert unlisted_files(first, [], within=("u.py",)) == ("u.py",)
    assert unlisted_files(first, []) == ("t.py", "u.py")
