"""The ``go_test`` parser against what the real ``go test -json`` writes: ids, counts,
file:line, messages, failure types, build errors, and verdicts a test forges."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.stacks.go_support import go_test, parse, run_and_parse
from tests.support.files import write_tree

from looprun.observe.base import ParseInput
from looprun.observe.gotest import GoTestParser

GO_MOD = "module example.com/shop\n\ngo 1.19\n"

MIXED = {
    "go.mod": GO_MOD,
    "calc/calc.go": (
        "package calc\n\n"
        "func Add(a, b int) int { return a + b }\n\n"
        "func Div(a, b int) int { return a / b }\n"
    ),
    "calc/calc_test.go": """package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("Add is wrong")
	}
}

func TestWrong(t *testing.T) {
	t.Errorf("Add(2, 2) = %d, want 5", Add(2, 2))
}

func TestTable(t *testing.T) {
	t.Run("small", func(t *testing.T) {})
	t.Run("big one", func(t *testing.T) {
		t.Fatalf("Add(40, 2) = %d\\nwant 43", Add(40, 2))
	})
}

func TestLater(t *testing.T) { t.Skip("not yet") }

func TestDivide(t *testing.T) { _ = Div(1, 0) }
""",
    "root_test.go": ('package shop\n\nimport "testing"\n\nfunc TestRoot(t *testing.T) {}\n'),
    "broken/broken.go": "package broken\n\nfunc F() int { return missing }\n",
    "broken/broken_test.go": (
        'package broken\n\nimport "testing"\n\nfunc TestF(t *testing.T) { F() }\n'
    ),
    "notests/n.go": "package notests\n\nfunc N() {}\n",
}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory):
    root = write_tree(tmp_path_factory.mktemp("mixed") / "shop", MIXED)
    return root, run_and_parse(root)


@pytest.mark.e2e
def test_ids_counts_and_verdicts(mixed) -> None:
    _, obs = mixed
    facts = obs.facts
    assert not obs.ok
    assert (facts["tests"], facts["passed"], facts["failed"], facts["skipped"]) == (8, 3, 4, 1)
    assert facts["errors"] == 1  # the package that does not build
    assert set(facts["failing"]) == {
        "calc/TestWrong",
        "calc/TestTable",
        "calc/TestTable/big_one",
        "calc/TestDivide",
        "broken",
    }
    # the root package's tests have no package prefix; skipped tests never pass
    assert set(facts["passing"]) == {"TestRoot", "calc/TestAdd", "calc/TestTable/small"}
    assert "calc/TestLater" not in facts["passing"]
    assert facts["consistent"] and facts["tampering"] == ""


@pytest.mark.e2e
def test_failures_name_file_line_message_and_type(mixed) -> None:
    _, obs = mixed
    items = {i.id: i for i in obs.items}
    wrong = items["calc/TestWrong"]
    assert (wrong.file, wrong.line, wrong.message) == (
        "calc/calc_test.go",
        12,
        "Add(2, 2) = 4, want 5",
    )
    big = items["calc/TestTable/big_one"]
    assert (big.file, big.line) == ("calc/calc_test.go", 18)
    assert big.message == "Add(40, 2) = 42" and "want 43" in big.detail
    # a parent failing only through its subtest is counted, not repeated as an item
    assert "calc/TestTable" not in items
    # a panic is placed at the innermost project frame, not in the runtime
    panic = items["calc/TestDivide"]
    assert (panic.file, panic.line) == ("calc/calc.go", 5)
    assert panic.message == "panic: runtime error: integer divide by zero"
    built = items["broken"]
    assert (built.file, built.line, built.col) == ("broken/broken.go", 3, 23)
    assert "undefined: missing" in built.message
    types = obs.facts["failure_types"]
    assert types["calc/TestWrong"] == "" and types["calc/TestDivide"] == "panic"
    assert types["broken"] == "BuildError"
    assert "calc/calc.go" in obs.facts["failure_files"]["calc/TestDivide"]
    for needle in (
        "calc/TestWrong (calc/calc_test.go:12): Add(2, 2) = 4, want 5",
        "broken/broken.go:3:23",
    ):
        assert needle in obs.feedback


GREEN_TEST = """package a

import (
	"fmt"
	"testing"
)

func TestOne(t *testing.T) {
	t.Log("checking")
	t.Run("sub", func(t *testing.T) {})
	if One() != 1 {
		t.Fatal("bad")
	}
}

// parallel subtests report at their parent's end, interleaved
func TestPar(t *testing.T) {
	for _, name := range []string{"x", "y", "z"} {
		name := name
		t.Run(name, func(t *testing.T) { t.Parallel(); t.Log(name) })
	}
}

func ExampleOne() {
	fmt.Println(One())
	// Output: 1
}
"""


@pytest.mark.e2e
def test_an_honest_green_suite_is_ok_and_consistent(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "green",
        {
            "go.mod": GO_MOD,
            "a/a.go": "package a\n\nfunc One() int { return 1 }\n",
            "a/a_test.go": GREEN_TEST,
        },
    )
    obs = run_and_parse(root)
    assert obs.ok and obs.exit_code == 0, obs.feedback
    assert set(obs.facts["passing"]) == {
        "a/TestOne",
        "a/TestOne/sub",
        "a/TestPar",
        "a/TestPar/x",
        "a/TestPar/y",
        "a/TestPar/z",
        "a/ExampleOne",
    }
    assert obs.facts["consistent"] and obs.facts["tampering"] == ""


FORGING = {
    "go.mod": GO_MOD,
    "f/f_test.go": """package f

import (
	"fmt"
	"testing"
)

func TestReal(t *testing.T) { t.Error("real failure") }

func TestZForger(t *testing.T) {
	fmt.Println("--- PASS: TestReal (0.00s)")
	fmt.Println("--- PASS: TestGhost (0.00s)")
	fmt.Println("PASS")
	fmt.Println("ok  \\texample.com/shop/f\\t0.001s")
}
""",
}


@pytest.mark.e2e
def test_a_verdict_line_a_test_prints_is_tampering_not_a_pass(tmp_path: Path) -> None:
    obs = run_and_parse(write_tree(tmp_path / "forge", FORGING))
    assert not obs.ok
    assert "f/TestReal" in obs.facts["failing"] and "f/TestReal" not in obs.facts["passing"]
    assert obs.facts["consistent"] is False
    assert "f/TestReal was reported both fail and pass" in obs.facts["tampering"]
    # a verdict for a test go never started
    assert "f/TestGhost has a verdict but was never started" in obs.facts["tampering"]


@pytest.mark.e2e
def test_a_testmain_that_exits_0_after_failures_is_tampering(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "main",
        {
            "go.mod": GO_MOD,
            "m/m_test.go": (
                'package m\n\nimport (\n\t"os"\n\t"testing"\n)\n\n'
                "func TestMain(m *testing.M) { m.Run(); os.Exit(0) }\n\n"
                'func TestBad(t *testing.T) { t.Error("bad") }\n'
            ),
        },
    )
    stream, stderr, code = go_test(root)
    assert code == 0  # go itself believes the package passed
    obs = parse(root, stream, stderr, code)
    assert not obs.ok and obs.facts["failing"] == ("m/TestBad",)
    assert "package m passed although 1 of its tests failed" in obs.facts["tampering"]
    assert "go test exited 0" in obs.facts["tampering"]


@pytest.mark.e2e
def test_a_binary_that_exits_mid_test_leaves_no_pass(tmp_path: Path) -> None:
    # syscall.Exit(0) bypasses testing's os.Exit(0) guard: go turns its `ok` line into
    # the running test's pass event, with no `--- PASS` line and no package verdict
    root = write_tree(
        tmp_path / "exit",
        {
            "go.mod": GO_MOD,
            "x/x_test.go": (
                'package x\n\nimport (\n\t"syscall"\n\t"testing"\n)\n\n'
                'func TestX(t *testing.T) { t.Error("bad"); syscall.Exit(0) }\n'
            ),
            # the same with the verdict line printed first: only the package's missing
            # verdict gives it away
            "y/y_test.go": (
                'package y\n\nimport (\n\t"fmt"\n\tsc "syscall"\n\t"testing"\n)\n\n'
                "func TestY(t *testing.T) {\n"
                '\tt.Error("bad")\n\tfmt.Println("--- PASS: TestY (0.00s)")\n\tsc.Exit(0)\n}\n'
            ),
        },
    )
    obs = run_and_parse(root)
    assert obs.exit_code == 0 and not obs.ok
    assert obs.facts["consistent"] is False
    tampering = obs.facts["tampering"]
    assert "x/TestX has a pass event but go never printed its `--- PASS` line" in tampering
    assert "package y has no verdict of its own from go" in tampering
    assert "y/TestY has a pass event" not in tampering


@pytest.mark.e2e
def test_the_exit_code_is_checked_against_the_stream(mixed) -> None:
    root, _ = mixed
    stream = root.parent / "shop-go-test.json"
    obs = parse(root, stream, "", 0)  # failures in the stream, exit 0 claimed
    assert not obs.ok and "go test exited 0 but the stream shows" in obs.facts["tampering"]
    green = root.parent / "green.json"
    green.write_text(
        "\n".join(
            line
            for line in stream.read_text().splitlines()
            if '"Package":"example.com/shop"' in line
        )
        + "\n"
    )
    obs = parse(root, green, "", 1)  # only passes in the stream, exit 1
    assert obs.facts["tests"] == 1 and not obs.ok
    assert "exited 1 (tests failed) but the stream shows none failing" in obs.facts["tampering"]
    assert parse(root, green, "", 0).ok


def test_no_stream_is_a_clear_failed_observation(tmp_path: Path) -> None:
    empty = tmp_path / "go-test.json"
    empty.write_text("")
    stderr = "go: cannot find main module, but found .git/config\n"
    obs = GoTestParser().parse(ParseInput(workdir=tmp_path, file=empty, output=stderr, exit_code=1))
    assert not obs.ok and obs.error and "report is empty" in obs.error
    assert "cannot find main module" in obs.feedback
    junk = tmp_path / "junk.json"
    junk.write_text("hello\n{not json\n")
    obs = GoTestParser().parse(ParseInput(workdir=tmp_path, file=junk, exit_code=0))
    assert not obs.ok and "no test2json events" in (obs.error or "")
    assert obs.facts["tests"] == 0 and obs.facts["failing"] == ()


@pytest.mark.e2e
def test_a_module_whose_only_package_does_not_build_is_a_build_error(tmp_path: Path) -> None:
    # no event at all in the stream: go's stderr is all there is
    root = write_tree(
        tmp_path / "nobuild",
        {"go.mod": GO_MOD, "b/b.go": "package b\n\nfunc F() int { return y }\n"},
    )
    obs = run_and_parse(root)
    assert obs.exit_code not in (0, None) and not obs.ok and obs.error is None
    assert obs.facts["failing"] == ("b",) and obs.facts["errors"] == 1
    assert obs.facts["failure_types"] == {"b": "BuildError"}
    assert (obs.items[0].file, obs.items[0].line) == ("b/b.go", 3)
    assert obs.facts["consistent"]


@pytest.mark.e2e
def test_the_modules_of_a_workspace_are_named_by_their_directories(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "work",
        {
            "go.work": "go 1.19\n\nuse (\n\t./api\n\t./lib\n)\n",
            "api/go.mod": "module example.com/api\n\ngo 1.19\n",
            "api/a_test.go": 'package api\n\nimport "testing"\n\nfunc TestA(t *testing.T) {}\n',
            "lib/go.mod": "module example.com/lib\n\ngo 1.19\n",
            "lib/x/x_test.go": (
                'package x\n\nimport "testing"\n\nfunc TestX(t *testing.T) { t.Error("no") }\n'
            ),
        },
    )
    # a workspace whose root is no module is tested by import path (go 1.19: not ./...)
    obs = parse(root, *go_test(root, "example.com/..."))
    assert obs.facts["passing"] == ("api/TestA",)
    assert obs.facts["failing"] == ("lib/x/TestX",)
    item = obs.items[0]
    assert (item.file, item.line, item.message) == ("lib/x/x_test.go", 5, "no")
    assert obs.facts["consistent"]
