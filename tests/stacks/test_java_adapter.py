"""The Java adapter: detection, one list of build files for the adapter and the pack, and
(e2e) the check tree a Maven build runs on - the base's pom.xml, no `.mvn/` or JUnit
configuration the run added, no build output from the working tree - whatever the
working tree says, so the policy is not the only thing between a cheat and a pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.stacks.java_project import MVN, need_maven, pom
from tests.support.files import write_tree
from tests.support.git_repos import git, git_repo

from looprun.checks import stacks
from looprun.checks.clean_tree import CheckTrees
from looprun.checks.stacks.detect import detect
from looprun.observe.base import ParseInput
from looprun.observe.surefire import SurefireParser

PACK = Path(__file__).resolve().parents[2] / "templates" / "observers" / "java.yaml"
CALC = """package com.acme;

public class Calc {
    public static int twice(int x) {
        return x + x;
    }
}
"""
TEST = """package com.acme;

import static org.junit.jupiter.api.Assertions.assertEquals;
import org.junit.jupiter.api.Test;

class CalcTest {
    @Test
    void twice() {
        assertEquals(4, Calc.twice(2));
    }
}
"""
PROJECT = {
    "pom.xml": pom(),
    ".gitignore": "target/\n",
    "src/main/java/com/acme/Calc.java": CALC,
    "src/test/java/com/acme/CalcTest.java": TEST,
}


@pytest.mark.parametrize("marker", ["pom.xml", "build.gradle", "build.gradle.kts"])
def test_maven_and_gradle_builds_are_the_java_stack(tmp_path: Path, marker: str) -> None:
    write_tree(tmp_path, {marker: "", "src/main/java/A.java": "class A {}\n"})
    assert detect(tmp_path).name == "java"


def test_the_adapter_and_the_pack_name_the_same_build_files() -> None:
    stack = stacks.get("java")
    assert [t.program for t in stack.tools] == ["mvn", "java"]
    assert all("default-jdk-headless maven" in t.install for t in stack.tools)
    pack = yaml.safe_load(PACK.read_text())
    assert pack["inputs"]["check_config"]["default"] == list(stack.pinned)
    assert pack["act"]["constraints"]["protect"]["paths"] == list(stack.pinned)
    assert {"target/", "*.class"} <= set(stack.untrusted)


@pytest.mark.e2e
def test_the_check_tree_builds_with_the_base_configuration(tmp_path: Path) -> None:
    need_maven()
    repo = git_repo(write_tree(tmp_path / "repo", PROJECT))
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    broken = CALC.replace("x + x", "x * 3")
    # what a model could write so the build skips or swallows the failure its change
    # causes: surefire excludes and skipTests, Maven's own config, JUnit's configuration,
    # and stale build output (a report that says all passed, a class compiled elsewhere)
    write_tree(
        repo,
        {
            "pom.xml": pom(
                surefire_config="\n          <skipTests>true</skipTests>"
                "\n          <excludes><exclude>**/CalcTest.java</exclude></excludes>"
            ),
            ".mvn/maven.config": "-DskipTests\n",
            "src/test/resources/junit-platform.properties": (
                "junit.jupiter.conditions.deactivate=*\n"
            ),
            "target/surefire-reports/TEST-com.acme.CalcTest.xml": (
                "<testsuite><testcase name='twice' classname='com.acme.CalcTest'/></testsuite>"
            ),
            "target/classes/com/acme/Calc.class": "not a class",
            "src/main/java/com/acme/Calc.java": broken,
        },
    )
    trees = CheckTrees(tmp_path / "checks")
    root, env, tampered = trees.prepare("java", workdir=repo, git_dir=None, base=base)
    assert tampered == ""
    assert (root / "pom.xml").read_text() == pom()
    assert not (root / ".mvn").exists()
    assert not (root / "src/test/resources/junit-platform.properties").exists()
    assert not (root / "target").exists()
    assert "x * 3" in (root / "src/main/java/com/acme/Calc.java").read_text()
    # Maven in that tree, with that environment, read-only ~/.m2: the test runs and fails
    done = subprocess.run(
        MVN, cwd=root, env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    obs = SurefireParser().parse(
        ParseInput(workdir=root, output=done.stdout + done.stderr, exit_code=done.returncode)
    )
    assert obs.facts["failing"] == ("com.acme.CalcTest.twice",), obs.feedback
    assert obs.facts["consistent"] is True and obs.ok is False


def test_without_maven_the_run_stops_before_any_model_call_with_the_install_hint(
    tmp_path: Path,
) -> None:
    repo = git_repo(write_tree(tmp_path / "repo", PROJECT))
    bin_dir = tmp_path / "bin"  # git (and bwrap, for the sandbox) but no mvn or java
    bin_dir.mkdir()
    for program in ("git", "bwrap"):
        found = shutil.which(program)
        if found:
            (bin_dir / program).symlink_to(found)
    script = tmp_path / "script.yaml"
    script.write_text("- text: never asked\n")
    done = subprocess.run(
        [sys.executable, "-m", "looprun", "bugfix", "--intent", "x", "--model", f"script:{script}"],
        cwd=repo,
        env={**os.environ, "PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "stack: java (pom.xml at the repository's root)" in done.stderr
    assert "mvn was not found on PATH: install a JDK and Maven" in done.stderr
    runs = repo / ".looprun" / "runs"
    assert not runs.exists() or not any((r / "exchanges.jsonl").exists() for r in runs.iterdir())
