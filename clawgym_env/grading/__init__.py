"""The sealed grading path: an episode's verdict from its final workspace and transcript only.

``await verify(spec, sandbox, transcript, judge)`` grades a finished episode's sandbox and
``await grade_workspace(spec, workspace_dir, transcript, backend)`` any final workspace, both in a fresh sealed
sandbox (``grade``); ``verify`` runs the task's verifiers there (code and script graders through signed drivers,
rubric judges through ``judge``, tagged answers through ``answer``); graders run the agent's code only in the jail
(``_agent_jail``). Why each step is shaped so: docs/design.md, "Hermetic grading".
"""

from __future__ import annotations

from clawgym_env.grading.answer import match_answer, parse_number
from clawgym_env.grading.grade import EarlyGrading, grade_final, grade_workspace
from clawgym_env.grading.verify import VerifyResult, make_transcript, verify

__all__ = ["EarlyGrading", "VerifyResult", "grade_final", "grade_workspace", "make_transcript", "match_answer", "parse_number", "verify"]
