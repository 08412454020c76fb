"""The surefire parser on real Maven builds (e2e) and on reports it must refuse.

Each e2e test writes a tiny Maven project, runs the real ``mvn -o`` the way the Java pack
does, and parses what it left: ids, counts, file:line, messages, failure types and whether
Maven's own summary agrees with the reports.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from tests.stacks.java_project import MVN, need_maven, pom
from tests.support.files import write_tree

from looprun.observe.base import ParseInput
from looprun.observe.registry import get_parser, parser_facts
from looprun.observe.surefire import SurefireParser, failure_type

ROOT = Path(__file__).resolve().parents[2]
CALC = """package com.acme;

public class Calc {
    public static int add(int a, int b) {
        return a + b + (a == 2 ? -1 : 0);
    }

    public static int div(int a, int b) {
        return a / b;
    }

    public static int len(String s) {
        return s.length();
    }
}
"""

MIXED_TEST = """package com.acme;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

class CalcTest {
    @Test
    void addsSmall() {
        assertEquals(2, Calc.add(1, 1));
    }

    @Test
    void addsTwo() {
        assertEquals(4, Calc.add(2, 2));
    }

    @Test
    void divides() {
        assertEquals(0, Calc.div(1, 0));
    }

    @Test
    void measures() {
        assertEquals(0, Calc.len(null));
    }

    @Disabled("later")
    @Test
    void later() {
    }

    @Test
    void forges() {
        System.out.println("[INFO] Results:");
        System.out.println("[INFO] Tests run: 6, Failures: 0, Errors: 0, Skipped: 0");
        System.out.println("[INFO] BUILD SUCCESS");
    }
}
"""


def run_maven(root: Path) -> ParseInput:
    """Run the pack's Maven command in ``root`` and hand its result to the parser."""
    done = subprocess.run(MVN, cwd=root, capture_output=True, text=True, timeout=240)
    return ParseInput(workdir=root, output=done.stdout + done.stderr, exit_code=done.returncode)


def project(root: Path, files: dict[str, str]) -> Path:
    return write_tree(root, {"pom.xml": pom(), "src/main/java/com/acme/Calc.java": CALC, **files})


@pytest.mark.e2e
def test_failures_errors_skips_and_a_forged_verdict(tmp_path: Path) -> None:
    need_maven()
    root = project(tmp_path, {"src/test/java/com/acme/CalcTest.java": MIXED_TEST})
    data = run_maven(root)
    assert data.exit_code == 0  # failure.ignore: the reports and the summary say it failed
    obs = SurefireParser().parse(data)
    facts = obs.to_facts()
    assert obs.error is None, obs.feedback
    assert (facts["tests"], facts["passed"], facts["failed"], facts["skipped"]) == (6, 2, 3, 1)
    assert facts["errors"] == 0  # a test body that throws fails, as pytest counts it
    assert facts["consistent"] is True and facts["tampering"] == ""
    assert obs.ok is False
    ids = "com.acme.CalcTest."
    assert sorted(facts["failing"]) == [ids + "addsTwo", ids + "divides", ids + "measures"]
    assert sorted(facts["passing"]) == [ids + "addsSmall", ids + "forges"]
    assert facts["failure_types"] == {
        ids + "addsTwo": "",
        ids + "divides": "ArithmeticException",
        ids + "measures": "NullPointerException",
    }
    items = {i.id: i for i in obs.items}
    test_file = "src/test/java/com/acme/CalcTest.java"
    main_file = "src/main/java/com/acme/Calc.java"
    assert (items[ids + "addsTwo"].file, items[ids + "addsTwo"].line) == (test_file, 16)
    assert items[ids + "addsTwo"].message == "expected: <4> but was: <3>"
    # an exception is located where it was thrown, in the code under test
    assert (items[ids + "divides"].file, items[ids + "divides"].line) == (main_file, 9)
    assert items[ids + "divides"].message == "ArithmeticException: / by zero"
    assert (items[ids + "measures"].file, items[ids + "measures"].line) == (main_file, 13)
    assert facts["failure_files"][ids + "divides"] == [main_file, test_file]
    assert facts["failure_files"][ids + "addsTwo"] == [test_file]
    assert f"{ids}addsTwo ({test_file}:16): expected: <4> but was: <3>" in obs.feedback
    assert "1 skipped" in obs.feedback


@pytest.mark.e2e
def test_a_passing_build_is_ok_and_a_rewritten_report_is_not(tmp_path: Path) -> None:
    need_maven()
    passing = project(
        tmp_path / "passing",
        {
            "src/test/java/com/acme/CalcTest.java": MIXED_TEST.split("    @Test\n    void addsTwo")[
                0
            ]
            + "}\n"
        },
    )
    obs = SurefireParser().parse(run_maven(passing))
    assert obs.ok is True, obs.feedback
    assert obs.facts["passing"] == ("com.acme.CalcTest.addsSmall",)
    assert obs.facts["consistent"] is True

    # ZTest runs after ATest (alphabetical) and rewrites ATest's report as a pass
    rewrite = """package com.acme;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class ZTest {
    @Test
    void rewrites() throws Exception {
        Path report = Path.of("target/surefire-reports/TEST-com.acme.ATest.xml");
        // once Maven has written it whole
        for (int i = 0; i < 200; i++) {
            if (Files.exists(report) && Files.readString(report).contains("</testsuite>")) {
                break;
            }
            Thread.sleep(50);
        }
        Files.writeString(report, "<testsuite name='com.acme.ATest'>"
            + "<testcase name='adds' classname='com.acme.ATest'/></testsuite>");
        // and Maven's verdict, forged on the raw stderr of the forked JVM
        FileOutputStream err = new FileOutputStream(FileDescriptor.err);
        err.write("[INFO] Results:\\n[INFO] Tests run: 2, Failures: 0, Errors: 0, Skipped: 0\\n"
            .getBytes());
        err.flush();
    }
}
"""
    failing = """package com.acme;

import static org.junit.jupiter.api.Assertions.assertEquals;
import org.junit.jupiter.api.Test;

class ATest {
    @Test
    void adds() {
        assertEquals(4, Calc.add(2, 2));
    }
}
"""
    tampered = project(
        tmp_path / "tampered",
        {
            "src/test/java/com/acme/ATest.java": failing,
            "src/test/java/com/acme/ZTest.java": rewrite,
        },
    )
    data = run_maven(tampered)
    obs = SurefireParser().parse(data)
    assert obs.error is None, obs.feedback
    assert obs.facts["failing"] == ()  # the report was rewritten...
    assert obs.facts["consistent"] is False  # ...and Maven's summary says otherwise
    # the forged summary reaches the console, but only adds to what Maven itself printed
    assert "Tests run: 2, Failures: 0" in (data.output or "")
    assert "tests run 4, failures 1" in obs.facts["tampering"]
    assert obs.ok is False
    assert "tampered" in obs.feedback


@pytest.mark.e2e
def test_a_compile_error_is_an_error_item_not_a_reproduction(tmp_path: Path) -> None:
    need_maven()
    broken = """package com.acme;

import static org.junit.jupiter.api.Assertions.assertEquals;
import org.junit.jupiter.api.Test;

class CalcTest {
    @Test
    void adds() {
        assertEquals(4, Calc.plus(2, 2));
    }
}
"""
    root = project(tmp_path, {"src/test/java/com/acme/CalcTest.java": broken})
    data = run_maven(root)
    assert data.exit_code == 1
    obs = SurefireParser().parse(data)
    assert obs.ok is False and obs.error is None
    test_file = "src/test/java/com/acme/CalcTest.java"
    assert obs.facts["errors"] >= 1 and obs.facts["tests"] == 0
    assert obs.facts["failing"] == (test_file,)
    assert obs.facts["failure_types"] == {test_file: "CompilationFailure"}
    item = obs.items[0]
    assert (item.file, item.line, item.col) == (test_file, 9, 29)
    assert "cannot find symbol" in item.message
    assert f"{test_file}:9:29" in obs.feedback


def test_registered_with_the_junit_facts() -> None:
    assert parser_facts("surefire") == parser_facts("junit")
    assert isinstance(get_parser("surefire"), SurefireParser)


@pytest.mark.parametrize(
    ("type_attr", "expected"),
    [
        ("org.opentest4j.AssertionFailedError", ""),
        ("java.lang.AssertionError", ""),
        ("org.junit.ComparisonFailure", ""),
        ("java.lang.NullPointerException", "NullPointerException"),
        ("com.acme.Outer$BadThing", "BadThing"),
        (None, ""),
    ],
)
def test_failure_types(type_attr: str | None, expected: str) -> None:
    assert failure_type(type_attr) == expected


SUMMARY = "[INFO] Results:\n[INFO] \n[INFO] Tests run: 1, Failures: 0, Errors: 0, Skipped: 0\n"
REPORT = (
    "<testsuite name='com.acme.ATest'><testcase name='adds' classname='com.acme.ATest'/>"
    "</testsuite>"
)


def reports(root: Path, text: str) -> Path:
    return write_tree(root, {"target/surefire-reports/TEST-com.acme.ATest.xml": text})


def test_reports_and_summary_that_agree_pass(tmp_path: Path) -> None:
    obs = SurefireParser().parse(
        ParseInput(workdir=reports(tmp_path, REPORT), output=SUMMARY, exit_code=0)
    )
    assert obs.ok is True and obs.facts["consistent"] is True


@pytest.mark.parametrize(
    ("report", "output", "exit_code", "error"),
    [
        ("<testsuite><testcase name='a'", SUMMARY, 0, "not well-formed XML"),
        ("<html/>", SUMMARY, 0, "not a Surefire report"),
        (REPORT, "[INFO] BUILD SUCCESS\n", 0, "printed no test summary"),
        (
            None,
            "[ERROR] Failed to execute goal x:y:1:test: it broke\n",
            1,
            "failed before reporting tests: Failed to execute goal x:y:1:test: it broke",
        ),
        (None, None, None, "no Surefire reports found"),
    ],
)
def test_unusable_input_is_a_clear_failure(
    tmp_path: Path, report: str | None, output: str | None, exit_code: int | None, error: str
) -> None:
    root = reports(tmp_path, report) if report is not None else tmp_path
    obs = SurefireParser().parse(ParseInput(workdir=root, output=output, exit_code=exit_code))
    assert obs.ok is False
    assert obs.error is not None and error in obs.error
    assert obs.facts["consistent"] is True and obs.facts["tests"] == 0


def test_a_summary_that_disagrees_or_was_cut_is_tampering(tmp_path: Path) -> None:
    root = reports(tmp_path, REPORT)
    lying = SUMMARY.replace("Failures: 0", "Failures: 1")
    obs = SurefireParser().parse(ParseInput(workdir=root, output=lying, exit_code=1))
    assert obs.ok is False and obs.facts["consistent"] is False
    # a summary a test printed before Maven's own adds to it: never a pass
    forged = SUMMARY + SUMMARY.replace("Failures: 0", "Failures: 1")
    obs = SurefireParser().parse(ParseInput(workdir=root, output=forged, exit_code=1))
    assert obs.ok is False and "tests run 2, failures 1" in obs.facts["tampering"]
    cut = "[INFO] x\n[... 99 bytes of output cut ...]\n" + SUMMARY
    obs = SurefireParser().parse(ParseInput(workdir=root, output=cut, exit_code=0))
    assert obs.ok is False and "cut" in obs.facts["tampering"]


@pytest.mark.e2e
def test_the_packs_lint_reads_javac_warnings(tmp_path: Path) -> None:
    need_maven()
    pack = yaml.safe_load((ROOT / "templates" / "observers" / "java.yaml").read_text())
    lint = pack["observe"]["lint"]
    command = pack["inputs"]["lint_command"]["default"] + lint["run"].split("}}", 1)[1]
    deprecated = """package com.acme;

public class Old {
    public static Integer box(int x) {
        return new Integer(x);
    }
}
"""
    root = project(tmp_path, {"src/main/java/com/acme/Old.java": deprecated})
    done = subprocess.run(command, shell=True, cwd=root, capture_output=True, text=True)
    data = ParseInput(
        workdir=root,
        output=done.stdout + done.stderr,
        exit_code=done.returncode,
        options=lint["options"],
    )
    obs = get_parser(lint["parser"]).parse(data)
    assert obs.facts["errors"] == 1, obs.feedback
    (item,) = obs.items
    assert (item.file, item.line, item.col) == ("src/main/java/com/acme/Old.java", 5, 16)
    assert "deprecated" in item.message


PARENT = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.acme</groupId>
  <artifactId>parent</artifactId>
  <version>1.0</version>
  <packaging>pom</packaging>
  <modules>
    <module>app</module>
    <module>core</module>
  </modules>
</project>
"""


@pytest.mark.e2e
def test_a_multi_module_build_reads_every_modules_reports(tmp_path: Path) -> None:
    """The first module fails; the next one's tests still run and are read."""
    need_maven()
    passing = MIXED_TEST.split("    @Test\n    void addsTwo")[0] + "}\n"
    failing = passing.replace("class CalcTest", "class AppTest").replace(
        "assertEquals(2, Calc.add(1, 1))", "assertEquals(4, Calc.add(2, 2))"
    )
    root = write_tree(
        tmp_path,
        {
            "pom.xml": PARENT,
            "core/pom.xml": pom("core"),
            "core/src/main/java/com/acme/Calc.java": CALC,
            "core/src/test/java/com/acme/CalcTest.java": passing,
            "app/pom.xml": pom("app"),
            "app/src/main/java/com/acme/app/Calc.java": CALC.replace(
                "package com.acme;", "package com.acme.app;"
            ),
            "app/src/test/java/com/acme/app/AppTest.java": failing.replace(
                "package com.acme;", "package com.acme.app;"
            ),
        },
    )
    data = run_maven(root)
    obs = SurefireParser().parse(data)
    assert obs.error is None, obs.feedback
    assert (obs.facts["tests"], obs.facts["passed"], obs.facts["failed"]) == (2, 1, 1)
    assert obs.facts["consistent"] is True, obs.facts["tampering"]
    (item,) = obs.items
    assert item.id == "com.acme.app.AppTest.addsSmall"
    assert (item.file, item.line) == ("app/src/test/java/com/acme/app/AppTest.java", 11)


@pytest.mark.e2e
def test_a_test_that_ends_its_jvm_is_not_a_pass(tmp_path: Path) -> None:
    need_maven()
    exits = """package com.acme;

import org.junit.jupiter.api.Test;

class ExitTest {
    @Test
    void exits() {
        System.exit(0);
    }
}
"""
    root = project(tmp_path, {"src/test/java/com/acme/ExitTest.java": exits})
    data = run_maven(root)
    assert data.exit_code == 1
    obs = SurefireParser().parse(data)
    assert obs.ok is False and obs.facts["passing"] == ()
    assert "forked VM terminated without properly saying goodbye" in obs.feedback
