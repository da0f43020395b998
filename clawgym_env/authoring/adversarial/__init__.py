"""Red-teaming graders: generic gaming strategies played against every task by ``tasks check --adversarial``.

Each strategy is a small ``Strategy`` class proposing ``Attempt`` s (final workspaces and
messages) from what an agent sees; the check grades each one through the real sandbox and
verify path and fails a task where any scores above ``metadata.max_exploit_score``.
"""

from __future__ import annotations

from clawgym_env.authoring.adversarial.base import Attempt, Strategy, TaskView
from clawgym_env.authoring.adversarial.reference import ReferenceOutput
from clawgym_env.authoring.adversarial.registry import (
    BUILTIN,
    ENTRY_POINT_GROUP,
    default_strategies,
    load_strategy,
    suite_strategies,
)

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "Attempt",
    "ReferenceOutput",
    "Strategy",
    "TaskView",
    "default_strategies",
    "load_strategy",
    "suite_strategies",
]
