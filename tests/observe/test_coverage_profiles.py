"""Go cover profiles and LCOV read into the coverage facts: from what the real tools write
(go test -coverprofile, node's test runner with its lcov reporter), and a broken report is
an error naming the report's line, never a silent gap in the coverage."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tests.support.tools import require

from looprun.observe.base import Observation, ParseInput
from looprun.observe.coverage import CoverageParser

GO_ENV = {"GOFLAGS": "-mod=readonly", "GOPROXY": "off", "GOTOOLCHAIN": "local"}

GO_FILES = {
    "go.mod": "module example.com/shapes\n\ngo 1.19\n",
    "area/area.go": """package area

func Square(side int) int {
	if side < 0 {
		return 0
	}
	return side * side
}
""",
    "area/area_test.go": """package area

import "testing"

func TestSquare(t *testing.T) {
	if Square(3) != 9 {
		t.Fatal("3*3")
	}
}
""",
    # no test of its own: -coverpkg=./... still measures it, at 0%
    "perimeter/perimeter.go": """package perimeter

func Square(side int) int {
	return 4 * side
}
""",
}

NODE_FILES = {
    "package.json": '{"name": "shapes", "version": "1.0.0", "scripts": {"test": "node --test"}}\n',
    "src/area.js": """function square(side) {
  if (side < 0) {
    return 0;
  }
  return side * side;
}

module.exports = { square };
""",
    "src/never.js": "function unused() {\n  return 1;\n}\n\nmodule.exports = { unused };\n",
    "test/area.test.js": """const test = require('node:test');
const assert = require('node:assert');
const { square } = require('../src/area.js');

test('squares', () => {
  assert.strictEqual(square(3), 9);
});
""",
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, "utf-8")
    return root


def _tool(name: str) -> str:
    return require(name, ".ci/run installs it")


def parse(workdir: Path, report: Path, **options: object) -> Observation:
    return CoverageParser().parse(ParseInput(workdir=workdir, file=report, options=options))


@pytest.fixture(scope="module")
def go_profile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A module and the profile `go test -coverpkg=./... -coverprofile` wrote outside it."""
    go = _tool("go")
    root = _write(tmp_path_factory.mktemp("go") / "shapes", GO_FILES)
    profile = root.parent / "cover.out"
    subprocess.run(
        [go, "test", "-count=1", "-coverpkg=./...", f"-coverprofile={profile}", "./..."],
        cwd=root,
        env={**os.environ, **GO_ENV},
        check=True,
        capture_output=True,
        timeout=300,
    )
    return root, profile


@pytest.fixture(scope="module")
def lcov(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A package and the LCOV node's test runner wrote outside it."""
    node = _tool("node")
    root = _write(tmp_path_factory.mktemp("node") / "shapes", NODE_FILES)
    report = root.parent / "coverage.lcov"
    subprocess.run(
        [node, "--test", "--experimental-test-coverage"],
        cwd=root,
        env={
            **os.environ,
            "NODE_OPTIONS": f"--test-reporter=lcov --test-reporter-destination={report}",
        },
        check=True,
        capture_output=True,
        timeout=300,
    )
    return root, report


@pytest.mark.e2e
def test_a_real_go_profile_gives_each_files_lines(go_profile: tuple[Path, Path]) -> None:
    root, profile = go_profile
    obs = parse(root, profile)
    assert obs.ok, obs.feedback
    files = dict(obs.facts["files"])
    # module paths made repository-relative; the untested package is there, at 0%
    assert set(files) == {"area/area.go", "perimeter/perimeter.go"}
    assert files["perimeter/perimeter.go"] == 0.0
    # Square's body runs but `return 0` (lines 4-6 of its block) does not
    assert 0.0 < files["area/area.go"] < 100.0
    target = parse(root, profile, paths=["area/area.go"])
    item = next(i for i in target.items if i.file == "area/area.go")
    assert "missing lines: 5-6" in item.detail
    assert target.facts["target_percent"] == files["area/area.go"]


@pytest.mark.e2e
def test_a_real_lcov_report_gives_each_files_lines(lcov: tuple[Path, Path]) -> None:
    root, report = lcov
    obs = parse(root, report, paths=["src/area.js"])
    assert obs.ok, obs.feedback
    assert "src/area.js" in obs.facts["files"]
    # node counts every line of a loaded file; lines 3-4 (`return 0;`) never ran
    item = next(i for i in obs.items if i.file == "src/area.js")
    assert "missing lines: 3-4" in item.detail
    assert obs.facts["lines_covered"] < obs.facts["lines_valid"]


@pytest.mark.e2e
def test_a_target_no_test_loaded_counts_as_uncovered(lcov: tuple[Path, Path]) -> None:
    """node reports only the files its tests loaded: a target left out is 0%, not ignored."""
    root, report = lcov
    assert "src/never.js" not in parse(root, report).facts["files"]
    obs = parse(root, report, paths=["src/area.js", "src/never.js"], min=50)
    assert obs.facts["targets"]["src/never.js"] == 0.0
    area = obs.facts["files"]["src/area.js"]
    assert obs.facts["target_percent"] < area
    assert "src/never.js:1: not measured: no test loaded it; 0.0% covered" in obs.feedback


@pytest.mark.e2e
def test_a_truncated_real_profile_names_the_broken_line(
    go_profile: tuple[Path, Path], lcov: tuple[Path, Path], tmp_path: Path
) -> None:
    root, profile = go_profile
    lines = profile.read_text("utf-8").splitlines()
    cut = tmp_path / "cut.out"
    cut.write_text("\n".join([*lines[:-1], lines[-1][: len(lines[-1]) // 2]]) + "\n", "utf-8")
    obs = parse(root, cut)
    assert not obs.ok
    assert f"cut.out:{len(lines)}: not a cover profile block" in (obs.error or "")

    node_root, report = lcov
    text = report.read_text("utf-8")
    cut_lcov = tmp_path / "cut.lcov"
    cut_lcov.write_text(text[: text.rindex("end_of_record")], "utf-8")
    obs = parse(node_root, cut_lcov)
    assert not obs.ok and "no end_of_record" in (obs.error or "")


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("p.out", "mode: set\nexample.com/m/a.go:3.1,5.2 1 1\nexample.com/m/a.go 7 1\n", "p.out:3"),
        ("p.out", "mode: set\nexample.com/m/a.go:9.1,5.2 1 1\n", "p.out:2: a block that ends"),
        ("c.lcov", "TN:\nSF:a.js\nDA:1,1\nDA:two,1\nend_of_record\n", "c.lcov:4: DA:"),
        ("c.lcov", "TN:\nDA:1,1\n", "c.lcov:2: DA: outside a record"),
        ("c.lcov", "SF:a.js\nDA:1,1\nSF:b.js\n", "c.lcov:3: SF: before the last record"),
        ("c.lcov", "SF:a.js\nDA:1,1\nBOGUS\nend_of_record\n", "c.lcov:3: not an LCOV record"),
    ],
)
def test_malformed_reports_name_file_and_line(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    (tmp_path / "go.mod").write_text("module example.com/m\n", "utf-8")
    report = tmp_path / name
    report.write_text(text, "utf-8")
    obs = parse(tmp_path, report)
    assert not obs.ok
    assert problem in (obs.error or ""), obs.error


def test_profile_paths_follow_the_modules_of_a_workspace(tmp_path: Path) -> None:
    """A go.work's modules each map to their own directory, the longest module path first."""
    _write(
        tmp_path,
        {
            "go.work": "go 1.19\n\nuse (\n\t./api\n\t./api/v2 // nested\n)\n",
            "api/go.mod": "module example.com/api\n",
            "api/v2/go.mod": "module example.com/api/v2\n",
        },
    )
    report = tmp_path / "cover.out"
    report.write_text(
        "mode: set\nexample.com/api/h.go:1.1,2.2 1 1\nexample.com/api/v2/h.go:1.1,3.2 1 0\n",
        "utf-8",
    )
    files = dict(parse(tmp_path, report).facts["files"])
    assert files == {"api/h.go": 100.0, "api/v2/h.go": 0.0}
