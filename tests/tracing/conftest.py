"""The OTLP receiver's module on the path, as the other test folders' helpers are."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
