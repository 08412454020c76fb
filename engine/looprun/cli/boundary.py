"""The one error boundary: every LooprunError becomes a message on stderr and its
documented exit code, never a traceback; so do an interrupt and an operating-system
failure (a full disk, a file where a directory must go)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from looprun.errors import EXIT_ERROR, LooprunError
from looprun.system.redact import Redactor, secret_values


@contextmanager
def error_boundary() -> Iterator[None]:
    """Map LooprunError to its exit code with a one-line (or per-problem) message, an
    interrupt to 130, and an operating-system failure to exit 1."""
    try:
        yield
    except LooprunError as exc:
        text = Redactor(secret_values()).text(str(exc))  # secrets never reach stderr
        click.echo(f"looprun: {text}" if "\n" not in text else text, err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("looprun: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(EXIT_ERROR)
    except OSError as exc:  # a full disk, a path in the way: say so, never a traceback
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"looprun: {exc.strerror or exc}{where}", err=True)
        sys.exit(EXIT_ERROR)
