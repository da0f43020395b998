"""Procedurally generated workspace tasks: templates x parameters -> many small, exactly graded variants.

Why: a suite whose tasks come in families lets a model be trained on some variants and measured on
others it never saw (different file names, numbers, keys and data), and doubles as a fast smoke
suite. Each template is a one-command job (write, append, copy, rename, delete, count, replace,
sort, extract a JSON field, sum a CSV column, head, grep, make folders); every variant gets:

- an instruction naming exactly what to read and write;
- a workspace with its input files;
- a hidden ``grade.py`` holding the expected end state (precomputed, so editing inputs cannot move
  it) that scores 1.0 only when every check holds and 0.0 otherwise: no partial credit;
- ``solution/solve.sh``: the one shell command that solves it (also in ``metadata.procgen.command``,
  which the expert policy in ``trainers.sft.expert`` replays through each harness's shell tool).

Parameters are drawn from pools split per template into a train part and a test part, so the two
suites share no parameter value. ``procgen-train-rl`` holds the train stream's next variants
(``-13`` to ``-20``: the same train pools, never in ``procgen-train``): RL, its probe and its
validation use them, so a policy tuned on ``procgen-train`` meets train-split variants it never saw.
``python -m clawgym_env.task.procgen [OUT]`` (re)writes ``OUT/procgen-train``, ``OUT/procgen-test``
and ``OUT/procgen-train-rl`` (default: the repository's ``tasks/``); the output is a pure function
of the seed and counts.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["RL_PER_TEMPLATE", "SPLITS", "TEMPLATES", "Variant", "generate", "rl_variants", "write_rl_suite", "write_suites"]

SPLITS = ("train", "test")
SEED = 16
TRAIN_PER_TEMPLATE = 12
TEST_PER_TEMPLATE = 2
RL_PER_TEMPLATE = 8
"""``procgen-train-rl``: variants ``TRAIN_PER_TEMPLATE + 1`` on of the train stream, none of them in ``procgen-train``."""

_KEYS = [
    "port",
    "retries",
    "timeout",
    "workers",
    "level",
    "limit",
    "depth",
    "width",
    "height",
    "weight",
    "speed",
    "budget",
    "quota",
    "score",
    "rank",
    "batch",
    "cache",
    "delay",
    "window",
    "margin",
]
_LOG_WORDS = ["started", "stopped", "synced", "queued", "loaded", "saved", "checked", "merged", "opened", "closed"]


@dataclass
class Variant:
    """One generated task: what the agent is told and given, what the grader expects, how to solve it."""

    template: str
    instruction: str
    command: str
    workspace: dict[str, str]
    checks: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)
    difficulty: str = "easy"
    exploit_exempt: dict[str, str] = field(default_factory=dict)
    """Gaming strategies whose attempts solve this template (``metadata.exploit_exempt``; see tasks check --adversarial)."""
    steps: list[str] = field(default_factory=list)
    """Multi-step templates (``procgen_multistep``): the solution's commands in order, each needing what the previous
    one printed (``metadata.procgen.steps``; ``command`` is then all of them, one per line)."""


class _Pools:
    """Per-template parameter pools split into disjoint train and test parts."""

    def __init__(self, rng: random.Random, split: str) -> None:
        self.rng = rng
        self.split = split
        self._cache: dict[str, list[Any]] = {}

    def draw(self, name: str, values: list[Any], k: int = 1) -> list[Any]:
        if name not in self._cache:
            shuffled = list(values)
            random.Random(f"{SEED}:{name}").shuffle(shuffled)
            cut = int(len(shuffled) * 0.7)
            self._cache[name] = shuffled[:cut] if self.split == "train" else shuffled[cut:]
        return self.rng.sample(self._cache[name], k)

    def num(self, name: str, k: int = 1) -> list[int]:
        return self.draw(name, list(range(100, 1000)), k)


def _lines(values: list[Any]) -> str:
    return "".join(f"{v}\n" for v in values)


def _t_write(p: _Pools) -> Variant:
    name, value = p.num("write.name")[0], p.num("write.value")[0]
    return Variant(
        "write-number",
        f"Create a file named {name}.txt containing exactly the number {value}.",
        f"echo {value} > {name}.txt",
        {},
        [{"op": "text", "path": f"{name}.txt", "text": f"{value}\n"}],
        {"name": name, "value": value},
    )


def _t_append(p: _Pools) -> Variant:
    old = p.rng.sample(range(100, 1000), 3)
    value = p.num("append.value")[0]
    return Variant(
        "append-line",
        f"Append a new line with the number {value} to the end of log.txt.",
        f"echo {value} >> log.txt",
        {"log.txt": _lines(old)},
        [{"op": "text", "path": "log.txt", "text": _lines([*old, value])}],
        {"value": value},
    )


def _t_copy(p: _Pools) -> Variant:
    n = p.num("copy.name")[0]
    body = _lines(p.rng.sample(range(100, 1000), 4))
    src, dst = f"data_{n}.txt", f"copy_{n}.txt"
    return Variant(
        "copy-file",
        f"Copy the file {src} to a new file named {dst}.",
        f"cp {src} {dst}",
        {src: body},
        [{"op": "text", "path": dst, "text": body}, {"op": "text", "path": src, "text": body}],
        {"name": n},
        exploit_exempt={
            "copy-input": "copying the file is the task",
            "everything:lines": "all lines of the only input are its copy",
            "everything:numbers": "the input is its numbers, one per line: listing them copies it",
        },
    )


def _t_rename(p: _Pools) -> Variant:
    n = p.num("rename.name")[0]
    body = _lines(p.rng.sample(range(100, 1000), 3))
    src, dst = f"draft_{n}.txt", f"final_{n}.txt"
    return Variant(
        "rename-file",
        f"Rename the file {src} to {dst}.",
        f"mv {src} {dst}",
        {src: body},
        [{"op": "text", "path": dst, "text": body}, {"op": "absent", "path": src}],
        {"name": n},
    )


def _t_delete(p: _Pools) -> Variant:
    n = p.num("delete.name")[0]
    keep = _lines(p.rng.sample(range(100, 1000), 2))
    return Variant(
        "delete-file",
        f"Delete the file tmp_{n}.txt and keep every other file.",
        f"rm tmp_{n}.txt",
        {f"tmp_{n}.txt": "scratch\n", "keep.txt": keep},
        [{"op": "absent", "path": f"tmp_{n}.txt"}, {"op": "text", "path": "keep.txt", "text": keep}],
        {"name": n},
    )


def _t_count(p: _Pools) -> Variant:
    k = p.draw("count.k", list(range(3, 40)))[0]
    body = _lines(p.rng.choices(_LOG_WORDS, k=k))
    return Variant(
        "count-lines",
        "Count the lines in items.txt and write the number to count.txt.",
        "wc -l < items.txt > count.txt",
        {"items.txt": body},
        [{"op": "number", "path": "count.txt", "value": k}],
        {"k": k},
    )


def _t_replace(p: _Pools) -> Variant:
    old, new = p.num("replace.old")[0], p.num("replace.new")[0]
    others = [v for v in p.rng.sample(range(100, 1000), 6) if v not in (old, new)][:3]
    rows = [old, others[0], old, others[1], others[2], old]
    body = "".join(f"item {v}\n" for v in rows)
    want = body.replace(str(old), str(new))
    return Variant(
        "replace-number",
        f"In notes.txt, replace every occurrence of {old} with {new}.",
        f"sed -i 's/{old}/{new}/g' notes.txt",
        {"notes.txt": body},
        [{"op": "text", "path": "notes.txt", "text": want}],
        {"old": old, "new": new},
    )


def _t_sort(p: _Pools) -> Variant:
    values = p.num("sort.values", 6)
    return Variant(
        "sort-numbers",
        "Sort the numbers in nums.txt in ascending order and write them to sorted.txt, one per line.",
        "sort -n nums.txt > sorted.txt",
        {"nums.txt": _lines(values)},
        [{"op": "text", "path": "sorted.txt", "text": _lines(sorted(values))}],
        {"values": values},
    )


def _t_json(p: _Pools) -> Variant:
    key = p.draw("json.key", _KEYS)[0]
    others = [k for k in p.rng.sample(_KEYS, 4) if k != key][:3]
    config = {k: p.rng.randrange(100, 1000) for k in [*others[:2], key, *others[2:]]}
    cmd = f"python3 -c \"import json; print(json.load(open('config.json'))['{key}'])\" > value.txt"
    return Variant(
        "json-field",
        f'Write the value of the "{key}" field of config.json to value.txt.',
        cmd,
        {"config.json": json.dumps(config, indent=2) + "\n"},
        [{"op": "number", "path": "value.txt", "value": config[key]}],
        {"key": key},
        "medium",
    )


def _t_sum(p: _Pools) -> Variant:
    units = p.num("sum.units", 4)
    rows = "".join(f"{i + 1},{u},{p.rng.randrange(1, 99)}\n" for i, u in enumerate(units))
    return Variant(
        "sum-column",
        "Sum the units column of sales.csv and write the total to total.txt.",
        "awk -F, 'NR>1{s+=$2} END{print s}' sales.csv > total.txt",
        {"sales.csv": "id,units,price\n" + rows},
        [{"op": "number", "path": "total.txt", "value": sum(units)}],
        {"units": units},
        "medium",
    )


def _t_head(p: _Pools) -> Variant:
    k = p.draw("head.k", list(range(2, 12)))[0]
    body = [f"{w} {i}" for i, w in enumerate(p.rng.choices(_LOG_WORDS, k=15))]
    return Variant(
        "head-lines",
        f"Write the first {k} lines of log.txt to head.txt.",
        f"head -n {k} log.txt > head.txt",
        {"log.txt": _lines(body)},
        [{"op": "text", "path": "head.txt", "text": _lines(body[:k])}],
        {"k": k},
    )


def _t_grep(p: _Pools) -> Variant:
    levels = p.rng.choices(["INFO", "INFO", "ERROR", "WARN"], k=10)
    levels[p.rng.randrange(10)] = "ERROR"
    codes = p.num("grep.codes", 10)
    body = [f"{lv} code {c}" for lv, c in zip(levels, codes, strict=True)]
    want = [b for b in body if "ERROR" in b]
    return Variant(
        "grep-errors",
        "Write every line of app.log that contains ERROR to errors.txt, in order.",
        "grep ERROR app.log > errors.txt",
        {"app.log": _lines(body)},
        [{"op": "text", "path": "errors.txt", "text": _lines(want)}],
        {"codes": codes},
    )


def _t_mkdir(p: _Pools) -> Variant:
    n = p.num("mkdir.name")[0]
    return Variant(
        "make-folders",
        f"Create the folders proj_{n}/src and proj_{n}/docs.",
        f"mkdir -p proj_{n}/src proj_{n}/docs",
        {},
        [{"op": "dir", "path": f"proj_{n}/src"}, {"op": "dir", "path": f"proj_{n}/docs"}],
        {"name": n},
    )


TEMPLATES: dict[str, Callable[[_Pools], Variant]] = {
    "write-number": _t_write,
    "append-line": _t_append,
    "copy-file": _t_copy,
    "rename-file": _t_rename,
    "delete-file": _t_delete,
    "count-lines": _t_count,
    "replace-number": _t_replace,
    "sort-numbers": _t_sort,
    "json-field": _t_json,
    "sum-column": _t_sum,
    "head-lines": _t_head,
    "grep-errors": _t_grep,
    "make-folders": _t_mkdir,
}
"""Template name -> variant maker; each draws its parameters from its own split pools."""


def generate(
    split: str, per_template: int | None = None, templates: dict[str, Callable[[_Pools], Variant]] | None = None
) -> list[tuple[str, Variant]]:
    """``(task id, variant)`` for every variant of ``split`` (of ``templates``, default the one-command ones); deterministic."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: use one of {SPLITS}")
    count = per_template or (TRAIN_PER_TEMPLATE if split == "train" else TEST_PER_TEMPLATE)
    out: list[tuple[str, Variant]] = []
    for name, make in (TEMPLATES if templates is None else templates).items():
        pools = _Pools(random.Random(f"{SEED}:{split}:{name}"), split)
        seen: set[str] = set()
        while len(seen) < count:
            v = make(pools)
            if v.instruction + json.dumps(v.workspace, sort_keys=True) in seen:
                continue
            seen.add(v.instruction + json.dumps(v.workspace, sort_keys=True))
            out.append((f"{name}-{len(seen):02d}", v))
    return out


_GRADER = '''"""Generated grader (clawgym_env.task.procgen): 1.0 only if every check holds, else 0.0."""
import json
from pathlib import Path

CHECKS = json.loads({checks!r})


def _ok(root, c):
    path = root / c["path"]
    if c["op"] == "absent":
        return not path.exists() and not path.is_symlink()
    if c["op"] == "dir":
        return path.is_dir() and not path.is_symlink()
    if not path.is_file() or path.is_symlink():
        return False
    text = path.read_text(encoding="utf-8")
    if c["op"] == "number":
        return text.strip() == str(c["value"])
    return text == c["text"] or text == c["text"].rstrip("\\n")


def grade(transcript, workspace_path):
    root = Path(workspace_path)
    try:
        ok = all(_ok(root, c) for c in CHECKS)
    except Exception:
        ok = False
    return {{"correct": 1.0 if ok else 0.0}}
'''


def _write_task(folder: Path, task_id: str, split: str, v: Variant) -> None:
    (folder / "hidden").mkdir(parents=True)
    (folder / "solution").mkdir()
    for rel, body in v.workspace.items():
        (folder / "workspace" / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / "workspace" / rel).write_text(body)
    (folder / "hidden" / "grade.py").write_text(_GRADER.format(checks=json.dumps(v.checks, sort_keys=True)))
    (folder / "solution" / "solve.sh").write_text(f"# Reference solution (generated).\nset -e\n{v.command}\n")
    spec = {
        "id": task_id,
        "version": 1,
        "category": v.template,
        "difficulty": v.difficulty,
        "instruction": v.instruction.replace("{", "{{ '{' }}") + "\n",
        **({"workspace": "workspace"} if v.workspace else {}),
        "hidden": "hidden",  # git keeps no empty folder
        "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
        # a shared 2-core box: CPU policies on a loaded machine must not time out; calls: the steps, "Done." and a slip
        "limits": {"wall_time_s": 900, "model_calls": max(4, len(v.steps) + 2), "memory_mb": 1024},
        "solution": "solution/solve.sh",
        "metadata": {
            "procgen": {
                "template": v.template,
                "split": split,
                "params": v.params,
                "command": v.command,
                **({"steps": v.steps} if v.steps else {}),
            },
            **({"exploit_exempt": v.exploit_exempt} if v.exploit_exempt else {}),
        },
    }
    (folder / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, width=1000))


def _write_suite(target: Path, description: str, variants: list[tuple[str, Variant]], split: str) -> Path:
    """(Re)write one suite folder; it appears whole or not at all."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        suite = {"name": target.name, "description": description, "pass_threshold": 1.0, "default_harness": "custom"}
        (tmp / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False, width=1000))
        for task_id, v in variants:
            _write_task(tmp / task_id, task_id, split, v)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def write_suites(
    out_dir: Path,
    *,
    train_per_template: int | None = None,
    test_per_template: int | None = None,
    prefix: str = "procgen",
    kind: str = "one-command",
    generator: str = "clawgym_env.task.procgen",
    templates: dict[str, Callable[[_Pools], Variant]] | None = None,
) -> list[Path]:
    """(Re)write ``out_dir/<prefix>-train`` and ``out_dir/<prefix>-test``; each appears whole or not at all."""
    templates = TEMPLATES if templates is None else templates
    written = []
    for split, count in (("train", train_per_template), ("test", test_per_template)):
        description = (
            f"Procedurally generated {kind} workspace tasks, {split} split ({len(templates)} templates; "
            f"parameters disjoint from the other split). Generated by {generator}; do not edit by hand."
        )
        written.append(_write_suite(out_dir / f"{prefix}-{split}", description, generate(split, count, templates), split))
    return written


def rl_variants(count: int = RL_PER_TEMPLATE) -> list[tuple[str, Variant]]:
    """The train stream's variants after ``procgen-train``'s: ids ``<template>-13`` on, the same train pools."""
    stream = generate("train", TRAIN_PER_TEMPLATE + count)
    return [(task_id, v) for task_id, v in stream if int(task_id.rsplit("-", 1)[1]) > TRAIN_PER_TEMPLATE]


def write_rl_suite(out_dir: Path, count: int = RL_PER_TEMPLATE) -> Path:
    """(Re)write ``out_dir/procgen-train-rl``: train-split variants that ``procgen-train`` (the SFT data) never holds."""
    description = (
        f"Procedurally generated one-command workspace tasks, train split, variants {TRAIN_PER_TEMPLATE + 1}-"
        f"{TRAIN_PER_TEMPLATE + count} ({len(TEMPLATES)} templates; the train pools, none of procgen-train's "
        "variants): RL, its probe and validation. Generated by clawgym_env.task.procgen; do not edit by hand."
    )
    return _write_suite(out_dir / "procgen-train-rl", description, rl_variants(count), "train")


if __name__ == "__main__":
    from clawgym_env.task.suite import repo_tasks_dir

    root = Path(sys.argv[1]) if len(sys.argv) > 1 else repo_tasks_dir()
    for path in [*write_suites(root), write_rl_suite(root)]:
        print(f"wrote {path}")
