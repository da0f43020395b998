"""Tasks: declarative specs, suites, verifiers and importers.

``load_suite("clawgym-original")`` gives a ``Suite`` whose ``tasks`` are ``TaskSpec`` s;
``await verify(spec, sandbox, transcript, judge)`` scores a finished episode and
``await grade_workspace(spec, workspace_dir, transcript, backend)`` any final workspace, both in a
fresh sealed sandbox;
``await check_suite(suite)`` proves every task sound (solution scores 1, doing nothing scores 0).
"""

from __future__ import annotations

from clawgym_env.task.answer import match_answer, parse_number
from clawgym_env.task.check import CheckResult, check_suite
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
from clawgym_env.task.grade import grade_workspace
from clawgym_env.task.verify import VerifyResult, make_transcript, verify

__all__ = [
    "AnswerVerifier",
    "CheckResult",
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
    "VerifyResult",
    "check_suite",
    "grade_workspace",
    "load_suite",
    "load_task_dir",
    "make_transcript",
    "match_answer",
    "parse_number",
    "parse_task",
    "user_suites_dir",
    "validate_suite",
    "verify",
]
