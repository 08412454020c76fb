"""Loading, composition and building of real templates (built-ins and ones written here)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from looprun.errors import Location, TemplateError
from looprun.expressions_helpers import *  # noqa: F403  # placeholder removed below
