"""Every address form pytest, unittest and doctest print is masked, so the same failure
gives the same signature from one run to the next."""

from __future__ import annotations

import pytest

from looprun.observe.normalise import failure_signature, normalise


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # pytest's shortened reprs in assertion messages (the middle is cut out)
        ("assert <generator o...7f5d98265a80> == 1", "assert <generator o...7f0011aa2b30> == 1"),
        (
            "assert <generator ob...x7f50d5e43780> == 1",
            "assert <generator ob...x7fd806fef2a0> == 1",
        ),
        ("assert <function f...5a80> == 1", "assert <function f...9c10> == 1"),
        # unittest and doctest print the full repr
        ("<app.Foo object at 0x7f5d98265a80> != 1", "<app.Foo object at 0x7f00aa001234> != 1"),
        # a bare hexadecimal id
        ("lock held by 7f5d98265a80", "lock held by 55aa01c3e9f0"),
    ],
)
def test_addresses_are_masked(first: str, second: str) -> None:
    assert normalise(first) == normalise(second)
    assert failure_signature([("t", first)]) == failure_signature([("t", second)])


def test_values_under_test_are_not_masked() -> None:
    assert normalise("assert 12345678 == 12345679") == "assert 12345678 == 12345679"
    assert normalise("assert 'deadbeef' == 'cafe'") == "assert 'deadbeef' == 'cafe'"
