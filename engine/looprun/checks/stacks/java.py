"""Java: Maven (Surefire reports, Maven's own summary); Gradle projects are recognised.

Maven's local repository (``~/.m2``) stays read-only inside the sandbox: ``mvn -o`` with
every artifact already there writes nothing to it (checked under bubblewrap), so no cache
directory is set. What configures the build - every pom.xml, ``.mvn/`` (``maven.config``
and ``jvm.config`` can add ``-DskipTests``), the wrappers and Gradle's build files - is
taken from the run's base.
"""

from __future__ import annotations

from looprun.checks.stacks.base import Stack, Tool
from looprun.checks.stacks.java_select import select, test_ids

_INSTALL = "install a JDK and Maven: apt-get install default-jdk-headless maven"

STACK = Stack(
    name="java",
    markers=("pom.xml", "build.gradle", "build.gradle.kts"),
    sources=(".java",),
    tools=(Tool("mvn", _INSTALL), Tool("java", _INSTALL)),
    pinned=(
        "**/pom.xml",
        ".mvn/**",
        "mvnw",
        "mvnw.cmd",
        "**/build.gradle",
        "**/build.gradle.kts",
        "**/settings.gradle",
        "**/settings.gradle.kts",
        "gradle.properties",
        "gradle/**",
        "gradlew",
        "gradlew.bat",
        # JUnit's own configuration: extension autodetection, deactivated conditions and
        # registered extensions change which tests run and how their failures count
        "**/junit-platform.properties",
        "**/META-INF/services/org.junit.*",
    ),
    # build output: compiled classes and old reports are never taken from the working tree
    untrusted=("target/", "build/", ".gradle/", "*.class"),
    select=select,
    tests_in=test_ids,
)
