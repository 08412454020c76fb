"""Build the sample locally: the platform team's templates repository (tagged v1, served
as a bare repository over file://) and a product team's repository whose template
extends the platform's by reference.

    python samples/shared_templates/build.py /tmp/shared
    cd /tmp/shared/team && looprun lock templates/payments-bugfix.yaml && looprun validate templates
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEAM = """\
looprun: 1
name: payments-bugfix
description: The platform's bugfix loop, pinned, for the payments service.
extends: git+{url}@v1#bugfix.yaml
act:
  constraints:
    paths:
      allow: ["payments/**", "tests/**"]
"""
_ID = ["-c", "user.name=platform", "-c", "user.email=platform@example.com"]


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *_ID, *args], cwd=cwd, check=True, capture_output=True)


def build(dest: Path) -> Path:
    """Create ``dest/platform`` (a working repository), ``dest/platform.git`` (what the
    team fetches) and ``dest/team``; return the team's template."""
    work = dest / "platform"
    shutil.copytree(HERE / "platform", work)
    git("init", "-q", "-b", "main", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", "platform templates", cwd=work)
    git("tag", "v1", cwd=work)
    bare = dest / "platform.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=dest)
    team = dest / "team"
    (team / "templates").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=team)
    template = team / "templates" / "payments-bugfix.yaml"
    template.write_text(TEAM.format(url=bare.as_uri()), encoding="utf-8")
    return template


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build.py DEST (an empty or new directory)")
    target = Path(sys.argv[1]).absolute()
    target.mkdir(parents=True, exist_ok=True)
    print(build(target))
