"""How held-out variants are found and selected on the rust stack, without cargo: the
top-level `#[test]` functions of a variants file become cargo_test ids, and kept ids
become `--test TARGET -- --exact NAME...`, quoted as data."""

from __future__ import annotations

import shlex

import pytest

from looprun.checks.runner import _selection
from looprun.checks.stacks import rust as rust_stack
from looprun.checks.stacks import rust_select
from looprun.checks.stacks.rust_select import select

VARIANTS = """use invoice::{average_unit_price_cents, Line};

#[test]
fn heldout_variant_1() {
    assert_eq!(average_unit_price_cents(&[]), 0);
}

#[test]
#[allow(clippy::unreadable_literal)]
// a comment between the attributes and the function
pub fn heldout_variant_2() -> Result<(), String> {
    Ok(())
}

fn helper() {}

// #[test]
// fn commented_out() {}

mod inner {
    #[test]
    fn nested() {}
}

#[test]
fn heldout_variant_1() {}
"""


def test_the_ids_are_the_top_level_tests_of_the_file() -> None:
    assert rust_select.test_ids("tests/heldout_variants.rs", VARIANTS) == (
        "tests/heldout_variants.rs::heldout_variant_1",
        "tests/heldout_variants.rs::heldout_variant_2",
    )
    # in a workspace member, cargo names the file relative to its package
    assert rust_select.test_ids("crates/core/tests/heldout_variants.rs", VARIANTS)[0] == (
        "tests/heldout_variants.rs::heldout_variant_1"
    )


def test_a_file_that_is_no_integration_test_defines_none() -> None:
    assert rust_select.test_ids("src/heldout_variants.rs", VARIANTS) == ()
    assert rust_select.test_ids("tests/common/heldout_variants.rs", VARIANTS) == ()
    assert rust_select.test_ids("tests/heldout_variants.rs", "fn main() {}\n") == ()


def test_kept_ids_select_their_test_binary_and_exact_names() -> None:
    ids = ("tests/heldout_variants.rs::heldout_variant_1", "tests/heldout_variants.rs::v_3")
    assert select(ids) == (
        "--test",
        "heldout_variants",
        "--",
        "--exact",
        "heldout_variant_1",
        "v_3",
    )
    # a workspace's label, a test in a module, a tests/NAME/main.rs target
    assert select(("core@tests/it.rs::m::t", "tests/big/main.rs::u")) == (
        *("--test", "it", "--test", "big"),
        *("--", "--exact", "m::t", "u"),
    )


@pytest.mark.parametrize(
    "bad",
    [
        (),
        ("src/lib.rs::tests::adds",),  # a unit test: not a test binary of its own
        ("doc::src/lib.rs - add",),  # a doctest
        ("tests/it.rs",),  # no name
        ("tests/it.rs::--nocapture",),
        ("tests/it.rs::a b",),
        ("tests/../x.rs::t",),
        ("build::tests/it.rs",),
    ],
)
def test_what_is_not_an_integration_test_id_is_never_selected(bad: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        select(bad)
    if bad:
        assert _selection("rust", bad) is None


def test_the_runner_quotes_the_rust_selection_as_data() -> None:
    assert rust_stack.STACK.select is select and rust_stack.STACK.tests_in is rust_select.test_ids
    words = _selection("rust", ("tests/it.rs::a",))
    assert words is not None
    assert " ".join(shlex.quote(w) for w in words) == "--test it -- --exact a"
