"""How held-out variants are found and selected on the go stack, without go: the test
functions of a variants file become go_test ids, and kept ids become one package list and
an anchored `-run` pattern; the pack's `beside` placement is checked when it loads."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from looprun.checks.runner import _selection
from looprun.checks.stacks import go as go_stack
from looprun.errors import TemplateError
from looprun.template.loader import load_template

VARIANTS = """package strutil

import "testing"

func TestHeldoutVariant1(t *testing.T) { check(t, "a") }

func TestHeldoutVariant2(tt *testing.T) {}

func Test(t *testing.T) {}

func Testable(t *testing.T) {}

func check(t *testing.T, s string) {}

func BenchmarkX(b *testing.B) {}

func (s suite) TestMethod(t *testing.T) {}

// func TestCommented(t *testing.T) {}
func TestHeldoutVariant1(t *testing.T) {}
"""


def test_the_ids_are_the_top_level_test_functions_of_the_file() -> None:
    assert go_stack.test_ids("strutil/heldout_variants_test.go", VARIANTS) == (
        "strutil/TestHeldoutVariant1",
        "strutil/TestHeldoutVariant2",
        "strutil/Test",
    )


def test_a_file_at_the_module_root_gives_bare_names() -> None:
    assert go_stack.test_ids("heldout_variants_test.go", VARIANTS)[0] == "TestHeldoutVariant1"
    assert go_stack.test_ids("x_test.go", "package x\n") == ()


def test_kept_ids_select_their_package_and_an_anchored_run_pattern() -> None:
    ids = ("strutil/TestHeldoutVariant1", "strutil/TestHeldoutVariant3")
    assert go_stack.select(ids) == (
        "./strutil",
        "-run",
        "^(TestHeldoutVariant1|TestHeldoutVariant3)$",
    )
    assert go_stack.select(("TestA", "a/b/TestB")) == (".", "./a/b", "-run", "^(TestA|TestB)$")


@pytest.mark.parametrize(
    "bad",
    [(), ("strutil/helper",), ("strutil/Test.*",), ("strutil/TestA|TestB",), ("strutil/",)],
)
def test_what_is_not_a_go_test_id_is_never_selected(bad: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        go_stack.select(bad)
    if bad:
        assert _selection("go", bad) is None


def test_the_runner_quotes_the_go_selection_as_data() -> None:
    words = _selection("go", ("strutil/TestA",))
    assert words is not None
    assert " ".join(shlex.quote(w) for w in words) == "./strutil -run '^(TestA)$'"
    # a stack without a selector takes the ids as they are (pytest node ids)
    assert _selection("python", ("tests/t.py::test_a",)) == ("tests/t.py::test_a",)


def _variants_template(tmp_path: Path, to: str) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(
        f"""looprun: 1
name: variants
plan:
  mode: static
  tasks:
    - {{id: reproduce, goal: a failing test, done_when: variants.ok}}
observe:
  variants:
    stack: go
    holdout:
      to: {to}
      variants: {{of: reproduce, count: "2", file: v_test.go, beside: true, prompt: "vary",
                 test_pattern: "^func Test"}}
    run: "> {{{{ run.artifacts }}}}/v.json go test -count=1 -json"
    parser: go_test
    file: "{{{{ run.artifacts }}}}/v.json"
act: {{prompt: fix it}}
exit: [variants.ok]
""",
        "utf-8",
    )
    return path


def test_beside_takes_a_file_name_for_to(tmp_path: Path) -> None:
    spec = load_template(_variants_template(tmp_path, "v_test.go")).observe["variants"]
    assert spec.holdout is not None and spec.holdout.variants is not None
    assert spec.holdout.variants.beside and spec.holdout.dest == "v_test.go"
    with pytest.raises(TemplateError, match="must be one plain file name"):
        load_template(_variants_template(tmp_path, "pkg/v_test.go"))
