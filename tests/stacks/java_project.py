"""Small real Maven projects for the Java stack's tests, and the toolchain gate.

The pom pins plugin versions the machine's local repository (``~/.m2``) holds, so
``mvn -o`` resolves everything offline. Surefire 3.5.x under Maven 3.8 asks for
plexus-utils 1.1 unless the plugin is given a newer one, hence the plugin dependency.
"""

from __future__ import annotations

import os
import shutil

import pytest

SUREFIRE = "3.5.2"
JUPITER = "5.10.2"
# the run command the pack uses, for tests that run Maven themselves
MVN = [
    "mvn",
    "-o",
    "-B",
    "-ntp",
    "test",
    "-Dmaven.test.redirectTestOutputToFile=true",
    "-Dmaven.test.failure.ignore=true",
]

POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.acme</groupId>
  <artifactId>{artifact}</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>org.junit.jupiter</groupId>
      <artifactId>junit-jupiter</artifactId>
      <version>{jupiter}</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <artifactId>maven-resources-plugin</artifactId>
        <version>3.3.1</version>
      </plugin>
      <plugin>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.13.0</version>
      </plugin>
      <plugin>
        <artifactId>maven-surefire-plugin</artifactId>
        <version>{surefire}</version>
        <configuration>
          <runOrder>alphabetical</runOrder>{surefire_config}
        </configuration>
        <dependencies>
          <dependency>
            <groupId>org.codehaus.plexus</groupId>
            <artifactId>plexus-utils</artifactId>
            <version>3.5.1</version>
          </dependency>
        </dependencies>
      </plugin>
    </plugins>
  </build>
</project>
"""


def pom(artifact: str = "calc", surefire_config: str = "") -> str:
    return POM.format(
        artifact=artifact, jupiter=JUPITER, surefire=SUREFIRE, surefire_config=surefire_config
    )


def need_maven() -> None:
    """Skip without Maven and a JDK, but fail under CI, which installs them."""
    missing = [tool for tool in ("mvn", "java", "javac") if shutil.which(tool) is None]
    if missing:
        why = f"{', '.join(missing)} not installed (apt-get install default-jdk-headless maven)"
        if os.environ.get("CI"):
            pytest.fail(why + ": CI installs them and must run this test")
        pytest.skip(why)
