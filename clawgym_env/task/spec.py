"""Task and suite specs: the validated, frozen form of ``task.yaml`` and ``suite.yaml``.

The YAML is data only. ``TaskFile`` mirrors one ``task.yaml`` as written; the loader
(``clawgym_env.task.loader``) checks its paths, renders its instruction once per ``params``
entry and produces one ``TaskSpec`` per variant, which is what the rest of ClawGym uses.

Layout and fields (paths are relative to the task folder and may not leave it)::

    tasks/<suite>/suite.yaml        name (= folder), description, pass_threshold, default_harness
    tasks/<suite>/<id>/task.yaml
      id: dedupe-contacts           # = folder name; full id "<suite>/<id>", "<id>-p<N>" per params entry
      category: productivity        # free text
      difficulty: easy              # easy | medium | hard
      instruction: |                # jinja2 (StrictUndefined), rendered with one params entry
        Read input/contacts.csv ...
      params: []                    # N dicts -> N variants
      workspace: workspace          # seeds the agent's workspace, seen at workspace_mount
      workspace_mount: /workspace
      hidden: hidden                # never visible to the agent; copied in after it finishes
      hidden_mount: /verifier       # absolute, or relative to workspace_mount (ClawGym: reward)
      verifiers:                    # weights normalised; sub-scores "<name>/<key>"
        - {kind: code, file: hidden/grade.py, weight: 0.7}    # grade(transcript, workspace_path) -> {str: float}
        - {kind: script, file: hidden/reward.sh}              # last stdout line: a float in [0, 1]
        - {kind: rubric, items: [{criterion, weight, options}], files: [output/report.md]}  # LLM judge
        - {kind: rubric, grading: jobbench, files: [output], items: [{criterion, weight, criteria: [...]}]}
        - {kind: answer, expected: "1.5 million", tolerance: 0.05, tag: answer, source: final_message}
        - {kind: answer, expected: "2,602", tolerance: 0, tag: FINAL_ANSWER, rule: officeqa}  # OfficeQA's scorer
      limits: {wall_time_s: 600, model_calls: 40, memory_mb: 4096}
      solution: solution/solve.sh   # bash in the sandbox, cwd = workspace, params in $CLAWGYM_PARAM_<NAME>;
                                    # or solution/final_message.txt
      metadata: {expected_noop_score: 0.0,   # declare partial credit a do-nothing agent legitimately gets
                 max_exploit_score: 0.0,     # the most a gaming non-solution may score (tasks check --adversarial)
                 exploit_exempt: {copy-input: "copying is the task"}}  # strategies whose attempts solve it
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "DIFFICULTIES",
    "ID_PATTERN",
    "SUITE_PATTERN",
    "VERIFIER_KINDS",
    "AnswerVerifier",
    "CodeVerifier",
    "Limits",
    "RubricItem",
    "RubricVerifier",
    "ScriptVerifier",
    "SuiteSpec",
    "TaskFile",
    "TaskSpec",
    "VerifierSpec",
]

ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
SUITE_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
DIFFICULTIES = ("easy", "medium", "hard")
VERIFIER_KINDS = ("code", "script", "rubric", "answer")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def _workspace_relative(path: str) -> str:
    if not path.strip() or path.startswith("/") or ".." in path.split("/"):
        raise ValueError(f"{path!r} must be a path relative to the workspace, without '..'")
    return path


class Limits(_Frozen):
    """Budgets for one episode; the runner enforces them."""

    wall_time_s: float = Field(default=600.0, gt=0, description="Wall-clock limit of the whole episode.")
    model_calls: int = Field(default=40, ge=1, description="Most model calls the harness may make.")
    memory_mb: int = Field(default=4096, ge=64, description="Memory limit of the sandbox.")

    _check_wall = field_validator("wall_time_s")(_finite)


class RubricItem(_Frozen):
    """One criterion the judge scores by picking one of ``options``."""

    criterion: str = Field(min_length=1, description="What the judge checks, as one sentence.")
    weight: float = Field(1.0, ge=0, description="Relative weight among the verifier's items.")
    options: dict[str, float] = Field(
        default_factory=lambda: {"yes": 1.0, "no": 0.0},
        description="Verdict label -> score in [0, 1]; the judge must answer with one label.",
    )
    name: str | None = Field(None, description="Sub-score name; defaults to item<N>.")
    criteria: list[str] = Field(
        default_factory=list, description="grading: jobbench: the rubric's criteria; it earns its weight only when all pass."
    )

    _check_weight = field_validator("weight")(_finite)

    @field_validator("options")
    @classmethod
    def _options_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        if not value:
            raise ValueError("needs at least one option, e.g. {yes: 1.0, no: 0.0}")
        for label, score in value.items():
            if not label.strip():
                raise ValueError("option labels must be non-empty")
            if not (math.isfinite(score) and 0.0 <= score <= 1.0):
                raise ValueError(f"option {label!r} has score {score}; scores must lie in [0, 1]")
        return value


class _VerifierBase(_Frozen):
    name: str | None = Field(None, description="Prefix of this verifier's sub-scores; defaults to its kind.")
    weight: float = Field(1.0, ge=0, description="Relative weight; weights are normalised over the task.")

    _check_weight = field_validator("weight")(_finite)


class CodeVerifier(_VerifierBase):
    """A python file defining ``grade(transcript, workspace_path) -> dict[str, float]``; runs in the sandbox."""

    kind: Literal["code"] = "code"
    file: str = Field(description="Path of the python file, relative to the task folder.")
    timeout_s: float = Field(120.0, gt=0, description="Wall-clock limit of the grading process.")


class ScriptVerifier(_VerifierBase):
    """A shell script run with bash in the sandbox; its last stdout line is the score."""

    kind: Literal["script"] = "script"
    file: str = Field(description="Path of the script, relative to the task folder.")
    timeout_s: float = Field(120.0, gt=0, description="Wall-clock limit of the script.")


class RubricVerifier(_VerifierBase):
    """An LLM judge scores each item from the final message and the listed workspace files."""

    kind: Literal["rubric"] = "rubric"
    items: list[RubricItem] = Field(min_length=1, description="The criteria.")
    files: list[str] = Field(default_factory=list, description="Workspace files shown to the judge.")
    max_file_chars: int = Field(20_000, ge=100, description="Each file is cut to this many characters.")
    grading: Literal["items", "jobbench"] = Field(
        "items",
        description="items: one judge call per item, scored by its verdict label, on the final message and "
        "files. jobbench: JobBench's official grading of the one folder in files (binary rubrics over their criteria, "
        "judged on the extracted text of the files in it only; reward = passed weight / total weight).",
    )

    @field_validator("files")
    @classmethod
    def _relative_files(cls, value: list[str]) -> list[str]:
        for f in value:
            _workspace_relative(f)
        return value

    @model_validator(mode="after")
    def _jobbench_shape(self) -> RubricVerifier:
        if self.grading == "jobbench":
            if len(self.files) != 1 or any(ch in self.files[0] for ch in "*?["):
                raise ValueError("grading: jobbench grades one deliverables folder: files must name it alone, e.g. [output]")
            empty = [i + 1 for i, item in enumerate(self.items) if not item.criteria or not all(c.strip() for c in item.criteria)]
            if empty:
                raise ValueError(f"grading: jobbench: items {empty} need a non-empty list of non-empty criteria")
        return self


class AnswerVerifier(_VerifierBase):
    """Extract a tagged answer and compare it with ``expected`` (numbers within tolerance)."""

    kind: Literal["answer"] = "answer"
    expected: list[str] = Field(min_length=1, description="Accepted answers (a single value is allowed).")
    tolerance: float = Field(0.05, ge=0, description="Relative tolerance for numeric answers.")
    tag: str | None = Field("answer", description="Answer tag (<answer>...</answer>); null: the whole text.")
    source: str = Field("final_message", description='"final_message" or "file:<workspace path>".')
    rule: Literal["clawgym", "officeqa"] = Field(
        "clawgym",
        description="clawgym: numbers within tolerance, else normalised text. officeqa: OfficeQA's "
        "official rule (a direct answer; the whole text when the tag is absent; tolerance at most 1).",
    )

    @field_validator("expected", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("expected must be text or a number, not a boolean")
        if isinstance(value, (str, int, float)):
            return [str(value)]
        if isinstance(value, list):
            return [str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in value]
        return value

    @field_validator("source")
    @classmethod
    def _source_form(cls, value: str) -> str:
        if value != "final_message" and not (value.startswith("file:") and len(value) > 5):
            raise ValueError('must be "final_message" or "file:<path relative to the workspace>"')
        if value.startswith("file:"):
            _workspace_relative(value[5:])
        return value

    @field_validator("tag")
    @classmethod
    def _tag_form(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", value):
            raise ValueError("must be a plain tag name such as answer")
        return value

    _check_tol = field_validator("tolerance")(_finite)

    @model_validator(mode="after")
    def _officeqa_tolerance(self) -> AnswerVerifier:
        if self.rule == "officeqa" and self.tolerance > 1:
            raise ValueError(
                f"tolerance {self.tolerance} is above 1; the officeqa rule takes a relative tolerance "
                "in [0, 1] (its published levels: 0, 0.001, 0.01, 0.05)"
            )
        return self


VerifierSpec = Annotated[
    CodeVerifier | ScriptVerifier | RubricVerifier | AnswerVerifier,
    Field(discriminator="kind"),
]


class SuiteSpec(_Frozen):
    """``suite.yaml``: what a suite is and when an attempt passes."""

    name: str = Field(pattern=SUITE_PATTERN, description="Equals the suite's folder name.")
    description: str = ""
    pass_threshold: float = Field(1.0, ge=0, le=1, description="An attempt passes iff score >= this.")
    default_harness: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class TaskFile(_Frozen):
    """One ``task.yaml`` exactly as written (paths still relative, instruction still a template)."""

    id: str = Field(pattern=ID_PATTERN, description="Equals the task's folder name.")
    suite: str | None = Field(None, description="Optional; must equal the suite folder name when given.")
    version: int = Field(1, ge=1)
    category: str = ""
    difficulty: Literal["easy", "medium", "hard"] = "medium"
    instruction: str = Field(min_length=1, description="jinja2 template rendered with one params entry.")
    params: list[dict[str, Any]] = Field(default_factory=list)
    workspace: str | None = None
    workspace_mount: str = "/workspace"
    hidden: str | None = None
    hidden_mount: str = "/verifier"
    verifiers: list[VerifierSpec] = Field(min_length=1)
    limits: Limits = Field(default_factory=lambda: Limits())
    solution: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("workspace_mount")
    @classmethod
    def _absolute_mount(cls, value: str) -> str:
        if not value.startswith("/") or ".." in value.split("/"):
            raise ValueError("must be an absolute path without '..', e.g. /workspace")
        return value.rstrip("/") or "/"

    @field_validator("hidden_mount")
    @classmethod
    def _hidden_mount(cls, value: str) -> str:
        if not value.strip() or ".." in value.split("/"):
            raise ValueError("must be an absolute path or one relative to workspace_mount, without '..'")
        return value

    @model_validator(mode="after")
    def _declared_floors(self) -> TaskFile:
        for key in ("expected_noop_score", "max_exploit_score"):
            value = self.metadata.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1):
                raise ValueError(f"metadata.{key} must be a number in [0, 1]")
        exempt = self.metadata.get("exploit_exempt")
        if exempt is not None and not (
            isinstance(exempt, dict) and all(isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in exempt.items())
        ):
            raise ValueError(
                "metadata.exploit_exempt must map strategy names to the reason their attempts solve "
                'the task, e.g. {copy-input: "copying the file is the task"}'
            )
        noop, most = self.metadata.get("expected_noop_score"), self.metadata.get("max_exploit_score")
        if noop is not None and most is not None and most < noop:
            raise ValueError(
                f"metadata.max_exploit_score ({most}) is below expected_noop_score ({noop}); "
                "doing nothing is itself a non-solution, so raise max_exploit_score to at least it"
            )
        return self


class TaskSpec(_Frozen):
    """One runnable task (one variant of a ``task.yaml``), with absolute host paths and a rendered instruction."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    suite: str = Field(description="Suite name.")
    id: str = Field(description='Task id within the suite; "<id>-p<N>" for a params variant.')
    base_id: str = Field(description="The id in task.yaml (same as id when there are no params).")
    variant: int | None = Field(None, description="Index into params, or None.")
    params: dict[str, Any] = Field(default_factory=dict, description="The params entry rendered in.")
    version: int = 1
    category: str = ""
    difficulty: str = "medium"
    instruction: str = Field(description="The rendered instruction the agent receives.")
    task_dir: Path = Field(description="Absolute folder holding task.yaml.")
    workspace_dir: Path | None = Field(None, description="Host folder seeding the workspace.")
    workspace_mount: str = Field("/workspace", description="Absolute workspace path inside the sandbox.")
    hidden_dir: Path | None = Field(None, description="Host folder of verifier material; never shown to the agent.")
    hidden_mount: str = Field("/verifier", description="Absolute path the hidden files are copied to, after the agent.")
    verifiers: tuple[VerifierSpec, ...] = Field(description="Verifiers, each with a unique name.")
    limits: Limits = Field(default_factory=lambda: Limits())
    solution_path: Path | None = Field(None, description="Reference solution: solve.sh or final_message.txt.")
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def full_id(self) -> str:
        """``"<suite>/<id>"``, unique across suites."""
        return f"{self.suite}/{self.id}"

    @property
    def expected_noop_score(self) -> float:
        """Score a do-nothing agent legitimately gets (0.0 unless the spec declares otherwise)."""
        return float(self.metadata.get("expected_noop_score", 0.0))

    @property
    def exploit_exempt(self) -> dict[str, str]:
        """Strategy name (or attempt label) -> why its attempts are solutions here, not exploits."""
        return dict(self.metadata.get("exploit_exempt") or {})

    @property
    def max_exploit_score(self) -> float:
        """The most a non-solution may score (``tasks check --adversarial``); default: the do-nothing floor."""
        return float(self.metadata.get("max_exploit_score", self.expected_noop_score))

    def host_path(self, rel: str) -> Path:
        """Host path of a file named relative to the task folder (already checked by the loader)."""
        return self.task_dir / rel

    def sandbox_path_of(self, rel: str) -> str | None:
        """Where a task-folder file appears inside the sandbox once hidden files are copied in, if it does."""
        if self.hidden_dir is None:
            return None
        host = (self.task_dir / rel).resolve()
        try:
            inner = host.relative_to(self.hidden_dir.resolve())
        except ValueError:
            return None
        return f"{self.hidden_mount.rstrip('/')}/{inner.as_posix()}"
