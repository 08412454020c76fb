"""Fixtures for the observe tests (helpers live in observe_helpers)."""

from observe_helpers import buggy_project, junit_report

__all__ = ["buggy_project", "junit_report"]
