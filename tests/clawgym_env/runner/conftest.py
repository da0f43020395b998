"""Make the named fake worker (runner_fakes.py) importable by "module:Class", as run configs name it."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
