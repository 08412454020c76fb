from __future__ import annotations

import sys
from pathlib import Path

import pytest
from observe_helpers import SHARED_FIXTURES, run, shared, write

from looprun.observe.base import ParseInput
from looprun.observe.coverage import CoverageParser

LIB = """\
def covered(x):
    return x + 1


def partly(x):
    if x > 0:
        return 1
    return -1


def never():
    a = 1
    b = 2
    return a + b
"""


def parse(workdir: Path, file: Path, **options):
    return CoverageParser().parse(ParseInput(workdir=workdir, file=file, options=options))


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("cov")
    write(
        tmp_path,
        {
            "src/lib.py": LIB,
            "src/other.py": "def o():\n    return 0\n",
            "tests/test_lib.py": "import sys\nsys.path.insert(0, 'src')\nimport lib, other\n\n"
            "def test_it():\n    assert lib.covered(1) == 2\n    assert lib.partly(1) == 1\n"
            "    assert other.o() == 0\n",
        },
    )
    cov = [sys.executable, "-m", "coverage"]
    proc = run(
        [*cov, "run", "--source=src", "-m", "pytest", "-q", "-p", "no:cacheprovider"], tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run([*cov, "xml", "-o", "coverage.xml"], tmp_path)
    run([*cov, "json", "-o", "coverage.json"], tmp_path)
    return tmp_path


def test_real_cobertura_and_json_agree(measured):
    xml = parse(measured, measured / "coverage.xml")
    js = parse(measured, measured / "coverage.json")
    assert xml.ok and js.ok
    # src/lib.py: 10 statements, lines 8 and 12-14 are not run -> 6/10; src/other.py 2/2
    assert xml.facts["lines_valid"] == js.facts["lines_valid"] == 12
    assert xml.facts["percent"] == js.facts["percent"] == pytest.approx(100 * 8 / 12, abs=0.01)
    assert (
        dict(xml.facts["files"])
        == dict(js.facts["files"])
        == {"src/lib.py": 60.0, "src/other.py": 100.0}
    )


def test_min_and_target_paths(measured):
    obs = parse(measured, measured / "coverage.xml", min=80, paths=["src/lib.py"])
    assert not obs.ok and obs.facts["target_percent"] == 60.0
    item = obs.items[0]
    assert item.file == "src/lib.py" and "missing lines: 8, 12-14" in item.detail
    assert "src/lib.py:8: 60.0% covered (< 80%)" in obs.feedback
    assert parse(measured, measured / "coverage.xml", min=80, paths="src/other.py").ok
    assert not parse(measured, measured / "coverage.xml", paths="nothing/**").ok
    assert parse(measured, measured / "coverage.json", min=60).ok


def test_bad_reports(tmp_path):
    (tmp_path / "bad.xml").write_text("<coverage line-rate='1'><packages>")
    (tmp_path / "html.xml").write_text("<html/>")
    (tmp_path / "bad.json").write_text('{"meta": {}}')
    assert "not well-formed XML" in parse(tmp_path, tmp_path / "bad.xml").error
    assert "not a Cobertura report" in parse(tmp_path, tmp_path / "html.xml").error
    assert "not a coverage.py JSON report" in parse(tmp_path, tmp_path / "bad.json").error
    assert "missing.xml: report not found" in parse(tmp_path, tmp_path / "missing.xml").error
    assert "option `min`" in parse(tmp_path, tmp_path / "html.xml", min="lots").error


@pytest.mark.skipif(not SHARED_FIXTURES.exists(), reason="shared fixtures not available")
def test_real_world_coverage():
    d = shared("coverage")
    istanbul = parse(d, d / "istanbul-cobertura-no-package.xml")
    assert istanbul.facts["percent"] == 100.0 and len(istanbul.facts["files"]) == 2
    java = parse(d, d / "cobertura-1.9-java-branch.xml")
    assert java.facts["percent"] == 90.0 and java.facts["branch_percent"] == 75.0
    old = parse(d, d / "coveragepy-4.0.3-lines-only.xml")
    assert old.facts["percent"] == 90.0 and old.facts["branch_percent"] is None
    js = parse(d, d / "coveragepy-5.3.1-report.json")
    assert js.facts["lines_valid"] == 179 and js.facts["lines_covered"] == 111
