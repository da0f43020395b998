"""Tasks as data: the validated specs of ``task.yaml`` / ``suite.yaml``, their loader and suites.

``load_suite("clawgym-original")`` gives a ``Suite`` whose ``tasks`` are ``TaskSpec`` s. Grading a finished
episode is ``clawgym_env.grading``; vetting and importing suites is ``clawgym_env.authoring``.
"""

from __future__ import annotations

from clawgym_env.task.loader import load_task_dir, parse_task
from clawgym_env.task.spec import (
    AnswerVerifier,
    CodeVerifier,
    Limits,
    RubricItem,
    RubricVerifier,
    ScriptVerifier,
    SuiteSpec,
    TaskSpec,
    VerifierSpec,
)
from clawgym_env.task.suite import Suite, TaskRegistry, load_suite, user_suites_dir, validate_suite

__all__ = [
    "AnswerVerifier",
    "CodeVerifier",
    "Limits",
    "RubricItem",
    "RubricVerifier",
    "ScriptVerifier",
    "Suite",
    "SuiteSpec",
    "TaskRegistry",
    "TaskSpec",
    "VerifierSpec",
    "load_suite",
    "load_task_dir",
    "parse_task",
    "user_suites_dir",
    "validate_suite",
]
