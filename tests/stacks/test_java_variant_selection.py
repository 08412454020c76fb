"""How held-out variants are found and selected on the java stack, without Maven: the
`@Test` methods of a variants class become surefire ids, and kept ids become one
`-Dtest=CLASS#m1+m2` option, quoted as data."""

from __future__ import annotations

import shlex

import pytest

from looprun.checks.runner import _selection
from looprun.checks.stacks import java as java_stack
from looprun.checks.stacks import java_select
from looprun.checks.stacks.java_select import select

VARIANTS = """package com.acme.money;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import org.junit.jupiter.api.Test;

class SplitVariantsTest {
    @Test
    void heldoutVariant1() {
        assertArrayEquals(new long[] {4, 3, 3}, Money.split(10, 3));
    }

    @Test
    @DisplayName("two parts")
    public void heldoutVariant2() throws Exception {
    }

    @org.junit.Test(timeout = 100)
    public static final void heldoutVariant3() {}

    @TestFactory
    Stream<DynamicTest> factory() { return Stream.empty(); }

    void helper() {}

    @Test
    void heldoutVariant1() {}
}
"""


def test_the_ids_are_the_test_methods_of_the_class_the_file_declares() -> None:
    path = "src/test/java/com/acme/money/HeldoutVariantsTest.java"
    # the class the text declares, whatever the file's name
    assert java_select.test_ids(path, VARIANTS) == (
        "com.acme.money.SplitVariantsTest.heldoutVariant1",
        "com.acme.money.SplitVariantsTest.heldoutVariant2",
        "com.acme.money.SplitVariantsTest.heldoutVariant3",
    )


def test_a_file_with_no_class_or_no_package_is_read_as_it_is() -> None:
    assert java_select.test_ids("V.java", "interface V {}\n") == ()
    assert java_select.test_ids("V.kt", VARIANTS) == ()
    bare = "public class VTest {\n    @Test\n    void a() {}\n}\n"
    assert java_select.test_ids("VTest.java", bare) == ("VTest.a",)


def test_kept_ids_select_each_class_once_with_its_methods() -> None:
    ids = ("com.acme.ATest.one", "com.acme.ATest.two", "com.acme.BTest.three")
    assert select(ids) == (
        "-Dtest=com.acme.ATest#one+two,com.acme.BTest#three",
        "-Dsurefire.failIfNoSpecifiedTests=false",
    )


@pytest.mark.parametrize(
    "bad",
    [
        (),
        ("ATest",),  # no method
        ("com.acme.ATest.*",),
        ("com.acme.ATest.a+b",),
        ("com.acme.ATest.param(int)[1]",),  # a parameterized invocation
        ("com.acme.*Test.a",),
        ("com.acme.ATest#a.b",),
        ("-Dx.a",),
    ],
)
def test_what_is_not_a_java_test_method_id_is_never_selected(bad: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        select(bad)
    if bad:
        assert _selection("java", bad) is None


def test_the_runner_quotes_the_java_selection_as_data() -> None:
    assert java_stack.STACK.select is select and java_stack.STACK.tests_in is java_select.test_ids
    words = _selection("java", ("com.acme.ATest.a",))
    assert words is not None
    assert " ".join(shlex.quote(w) for w in words) == (
        "'-Dtest=com.acme.ATest#a' -Dsurefire.failIfNoSpecifiedTests=false"
    )
