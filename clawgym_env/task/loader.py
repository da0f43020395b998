"""Turn ``task.yaml`` / ``suite.yaml`` files into specs, with errors that name file, field and fix.

Every failure here is a ``TaskSpecError``: YAML syntax, schema violations (pydantic's errors
are rewritten into one readable message), paths that leave the task folder (``..``, absolute
paths, symlinks), and jinja2 template errors in the instruction.
"""

from __future__ import annotations

import difflib
import functools
import os
import posixpath
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from clawgym_env.errors import TaskSpecError
from clawgym_env.task.spec import (
    VERIFIER_KINDS,
    CodeVerifier,
    ScriptVerifier,
    SuiteSpec,
    TaskFile,
    TaskSpec,
)

__all__ = [
    "SUITE_FILE",
    "TASK_FILE",
    "escape_template",
    "load_suite_spec",
    "load_task_dir",
    "parse_task",
    "read_yaml",
    "render_instruction",
]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

TASK_FILE = "task.yaml"
SUITE_FILE = "suite.yaml"

_FIXES: dict[str, str] = {
    "missing": "add this field",
    "extra_forbidden": "remove it or fix its spelling",
    "string_type": "write it as text",
    "int_type": "write a whole number",
    "int_parsing": "write a whole number",
    "float_type": "write a number",
    "float_parsing": "write a number",
    "bool_type": "write true or false",
    "list_type": "write a YAML list",
    "dict_type": "write a YAML mapping (key: value)",
    "model_type": "write a YAML mapping (key: value)",
    "model_attributes_type": "write a YAML mapping (key: value)",
    "string_pattern_mismatch": "use lowercase letters, digits and '-', starting with a letter or digit",
    "too_short": "give at least one entry",
    "string_too_short": "give a non-empty value",
    "greater_than": "use a larger value",
    "greater_than_equal": "use a larger value",
    "less_than_equal": "use a smaller value",
    "literal_error": "use one of the listed values",
    "union_tag_invalid": "use kind: " + " | ".join(VERIFIER_KINDS),
    "union_tag_not_found": "add kind: " + " | ".join(VERIFIER_KINDS),
    "value_error": "see the message",
    "finite_number": "write a finite number",
}


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in VERIFIER_KINDS and out.endswith("]"):
            continue  # pydantic adds the union tag to the location; readers don't need it
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _known_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> set[str]:
    """The field names allowed where ``loc`` points (all union members' names for a verifier)."""
    models = [model]
    for part in loc[:-1]:
        if isinstance(part, int) or part in VERIFIER_KINDS:
            continue
        models = [m for cls in models if part in cls.model_fields for m in _models_in(cls.model_fields[part].annotation)]
    return {name for cls in models for name in cls.model_fields}


def _explain(exc: ValidationError, file: Path, model: type[BaseModel] | None = None) -> TaskSpecError:
    lines = []
    for err in exc.errors(include_url=False):
        kind = err["type"]
        msg = err["msg"]
        if kind == "union_tag_invalid":
            tag = (err.get("ctx") or {}).get("tag", "?")
            msg = f"unknown verifier kind {tag!r}"
        elif kind == "union_tag_not_found":
            msg = "verifier has no 'kind'"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        fix = _FIXES.get(kind, "correct the value")
        if kind == "extra_forbidden" and model is not None and err["loc"]:
            close = difflib.get_close_matches(str(err["loc"][-1]), sorted(_known_fields(model, err["loc"])), n=1)
            if close:
                fix = f"did you mean {close[0]!r}? Rename it"
        lines.append(f"{file}: field {_where(err['loc'])}: {msg}. Fix: {fix}.")
    if len(lines) == 1:
        return TaskSpecError(lines[0])
    return TaskSpecError(f"{file}: {len(lines)} problems:\n  " + "\n  ".join(lines))


def read_yaml(file: Path) -> dict[str, Any]:
    """Read a YAML mapping; any failure is a TaskSpecError naming the file."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskSpecError(f"{file}: cannot read: {exc}. Fix: make it a readable UTF-8 file.") from exc
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader (libyaml's when present)
    except yaml.YAMLError as exc:
        raise TaskSpecError(f"{file}: invalid YAML: {exc}. Fix: correct the YAML syntax.") from exc
    except RecursionError as exc:
        raise TaskSpecError(f"{file}: YAML nested too deeply. Fix: flatten it.") from exc
    if not isinstance(data, dict):
        got = type(data).__name__
        raise TaskSpecError(f"{file}: field (top level): expected a mapping, got {got}. Fix: write key: value pairs.")
    return data


def escape_template(text: str) -> str:
    """Wrap literal text so jinja2 renders it unchanged (for importers of third-party prompts)."""
    if "{" not in text and "%" not in text:
        return text
    parts = text.split("{% endraw %}")
    return "{{ '{% endraw %}' }}".join("{% raw %}" + p + "{% endraw %}" for p in parts)


@functools.cache
def _jinja() -> Any:
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)


def render_instruction(template: str, params: Mapping[str, Any], file: Path, where: str) -> str:
    """Render the instruction template with StrictUndefined in a jinja2 sandbox."""
    import jinja2

    if "{" not in template:  # plain text: render as jinja2 would (newlines unified, one trailing newline dropped)
        text = template.replace("\r\n", "\n").replace("\r", "\n")
        return text[:-1] if text.endswith("\n") else text
    raw_open, raw_close = "{% raw %}", "{% endraw %}"
    if template.startswith(raw_open) and template.endswith(raw_close) and template.count("{%") == 2:
        return template[len(raw_open) : -len(raw_close)].replace("\r\n", "\n").replace("\r", "\n")  # escaped literal text
    try:
        return _jinja().from_string(template).render(**params)
    except jinja2.TemplateSyntaxError as exc:
        raise TaskSpecError(
            f"{file}: field instruction: template syntax error on line {exc.lineno}: {exc.message}. "
            "Fix: correct the jinja2 syntax, or wrap literal braces in {% raw %}...{% endraw %}."
        ) from exc
    except jinja2.UndefinedError as exc:
        have = ", ".join(sorted(params)) or "none"
        raise TaskSpecError(
            f"{file}: field instruction ({where}): {exc.message} (params given: {have}). "
            "Fix: add the name to every params entry, or wrap literal braces in {% raw %}...{% endraw %}."
        ) from exc
    except Exception as exc:  # any template failure is a spec error
        raise TaskSpecError(
            f"{file}: field instruction ({where}): template failed: {type(exc).__name__}: {exc}. Fix: simplify the template expression."
        ) from exc


def _inside(task_dir: Path, rel: str, file: Path, field: str, *, want: str) -> Path:
    """Resolve ``rel`` under ``task_dir``; reject absolute, ``..`` and symlink escapes; check it exists."""
    if not rel or not rel.strip():
        raise TaskSpecError(f"{file}: field {field}: empty path. Fix: name a path relative to the task folder.")
    if "\x00" in rel:
        raise TaskSpecError(f"{file}: field {field}: path contains a NUL byte. Fix: use a plain relative path.")
    if rel.startswith(("/", "\\")) or os.path.isabs(rel) or (len(rel) > 1 and rel[1] == ":"):
        raise TaskSpecError(f"{file}: field {field}: {rel!r} is absolute. Fix: use a path relative to the task folder {task_dir}.")
    if ".." in Path(rel).parts:
        raise TaskSpecError(f"{file}: field {field}: {rel!r} climbs out with '..'. Fix: keep it inside the task folder {task_dir}.")
    path = task_dir / rel
    try:
        real = path.resolve()
        root = task_dir.resolve()
    except (OSError, RuntimeError) as exc:
        raise TaskSpecError(f"{file}: field {field}: cannot resolve {rel!r}: {exc}. Fix: remove the link loop.") from exc
    if real != root and root not in real.parents:
        raise TaskSpecError(
            f"{file}: field {field}: {rel!r} is a symlink leading outside the task folder (to {real}). "
            "Fix: copy the file into the task folder instead of linking it."
        )
    ok = path.is_dir() if want == "folder" else path.is_file()
    if not ok:
        raise TaskSpecError(f"{file}: field {field}: {want} {rel!r} does not exist in {task_dir}. Fix: create it or correct the path.")
    return path


def _no_escaping_links(folder: Path, task_dir: Path, file: Path, field: str) -> None:
    root = task_dir.resolve()
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                real = p.resolve()
                if real != root and root not in real.parents:
                    raise TaskSpecError(
                        f"{file}: field {field}: {p} is a symlink leading outside the task folder (to {real}). "
                        "Fix: copy the file in instead of linking it."
                    )


def _mount(base: str, value: str) -> str:
    joined = value if value.startswith("/") else posixpath.join(base, value)
    return posixpath.normpath(joined)


def _name_verifiers(verifiers: list[Any]) -> tuple[Any, ...]:
    counts: dict[str, int] = {}
    for v in verifiers:
        counts[v.name or v.kind] = counts.get(v.name or v.kind, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for v in verifiers:
        base = v.name or v.kind
        if counts[base] > 1:
            seen[base] = seen.get(base, 0) + 1
            out.append(v.model_copy(update={"name": f"{base}{seen[base]}"}))
        else:
            out.append(v.model_copy(update={"name": base}))
    return tuple(out)


def parse_task(data: Any, task_dir: Path, suite: str, file: Path | None = None) -> list[TaskSpec]:
    """Validate one task mapping and expand its params into TaskSpecs (one, or one per params entry)."""
    file = file or task_dir / TASK_FILE
    if not isinstance(data, dict):
        raise TaskSpecError(f"{file}: field (top level): expected a mapping. Fix: write key: value pairs.")
    try:
        raw = TaskFile.model_validate(data)
    except ValidationError as exc:
        raise _explain(exc, file, TaskFile) from None
    except RecursionError:
        raise TaskSpecError(f"{file}: nested too deeply. Fix: flatten the YAML.") from None
    if raw.id != task_dir.name:
        raise TaskSpecError(f"{file}: field id: {raw.id!r} differs from the folder name {task_dir.name!r}. Fix: make them equal.")
    if raw.suite is not None and raw.suite != suite:
        raise TaskSpecError(f"{file}: field suite: {raw.suite!r} differs from the suite folder {suite!r}. Fix: make them equal or drop it.")
    names = [v.name for v in raw.verifiers if v.name]
    if len(names) != len(set(names)):
        raise TaskSpecError(f"{file}: field verifiers: names repeat ({', '.join(names)}). Fix: give each verifier its own name.")
    if sum(v.weight for v in raw.verifiers) <= 0:
        raise TaskSpecError(f"{file}: field verifiers: all weights are 0. Fix: give at least one verifier a positive weight.")

    workspace = _inside(task_dir, raw.workspace, file, "workspace", want="folder") if raw.workspace else None
    hidden = _inside(task_dir, raw.hidden, file, "hidden", want="folder") if raw.hidden else None
    for folder, field in ((workspace, "workspace"), (hidden, "hidden")):
        if folder is not None:
            _no_escaping_links(folder, task_dir, file, field)
    if workspace is not None and hidden is not None:
        w, h = workspace.resolve(), hidden.resolve()
        if w == h or w in h.parents or h in w.parents:
            raise TaskSpecError(f"{file}: field hidden: overlaps the workspace folder. Fix: keep hidden files in their own folder.")
    for i, v in enumerate(raw.verifiers):
        if isinstance(v, (CodeVerifier, ScriptVerifier)):
            path = _inside(task_dir, v.file, file, f"verifiers[{i}].file", want="file")
            if workspace is not None and workspace.resolve() in path.resolve().parents:
                raise TaskSpecError(
                    f"{file}: field verifiers[{i}].file: {v.file!r} lies in the workspace, where the agent can read and change it. "
                    "Fix: move it into the hidden folder."
                )
    solution = _inside(task_dir, raw.solution, file, "solution", want="file") if raw.solution else None
    if solution is not None and workspace is not None and workspace.resolve() in solution.resolve().parents:
        raise TaskSpecError(
            f"{file}: field solution: {raw.solution!r} lies in the workspace, where the agent would read it. "
            "Fix: move it to solution/ next to task.yaml."
        )
    hidden_mount = _mount(raw.workspace_mount, raw.hidden_mount)
    ws_mount = raw.workspace_mount.rstrip("/") + "/"
    if hidden_mount == "/" or ws_mount.startswith(hidden_mount.rstrip("/") + "/"):
        raise TaskSpecError(
            f"{file}: field hidden_mount: {hidden_mount!r} holds the workspace {raw.workspace_mount!r}; it is emptied "
            "before the hidden files are copied in. Fix: use a folder of its own, e.g. /verifier or reward."
        )

    variants: list[tuple[int | None, dict[str, Any]]] = [(None, {})]
    if raw.params:
        variants = list(enumerate(raw.params))
    common: dict[str, Any] = {
        "suite": suite,
        "base_id": raw.id,
        "version": raw.version,
        "category": raw.category,
        "difficulty": raw.difficulty,
        "task_dir": task_dir.absolute(),
        "workspace_dir": workspace.absolute() if workspace else None,
        "workspace_mount": raw.workspace_mount,
        "hidden_dir": hidden.absolute() if hidden else None,
        "hidden_mount": hidden_mount,
        "verifiers": _name_verifiers(list(raw.verifiers)),
        "limits": raw.limits,
        "solution_path": solution.absolute() if solution else None,
        "metadata": raw.metadata,
    }
    specs = []
    for index, params in variants:
        for key in params:
            if not key.isidentifier():
                raise TaskSpecError(f"{file}: field params[{index}]: key {key!r} is not a valid name. Fix: use letters, digits and '_'.")
        where = "no params" if index is None else f"params[{index}]"
        text = render_instruction(raw.instruction, params, file, where)
        if not text.strip():
            raise TaskSpecError(f"{file}: field instruction ({where}): renders to empty text. Fix: write the task.")
        task_id = raw.id if index is None else f"{raw.id}-p{index}"
        specs.append(TaskSpec(id=task_id, variant=index, params=params, instruction=text, **common))
    return specs


def load_task_dir(task_dir: Path, suite: str) -> list[TaskSpec]:
    """Load ``<task_dir>/task.yaml`` into its TaskSpecs."""
    file = task_dir / TASK_FILE
    if not file.is_file():
        raise TaskSpecError(f"{file}: missing. Fix: create task.yaml in {task_dir}.")
    return parse_task(read_yaml(file), task_dir, suite, file)


def load_suite_spec(suite_dir: Path) -> SuiteSpec:
    """Load and check ``<suite_dir>/suite.yaml``."""
    file = suite_dir / SUITE_FILE
    if not file.is_file():
        raise TaskSpecError(f"{file}: missing. Fix: create suite.yaml with at least `name: {suite_dir.name}`.")
    try:
        spec = SuiteSpec.model_validate(read_yaml(file))
    except ValidationError as exc:
        raise _explain(exc, file, SuiteSpec) from None
    if spec.name != suite_dir.name:
        raise TaskSpecError(f"{file}: field name: {spec.name!r} differs from the folder name {suite_dir.name!r}. Fix: make them equal.")
    return spec
