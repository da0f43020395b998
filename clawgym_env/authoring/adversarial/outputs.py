"""Strategies that game output files: nothing in them, placeholders, bare structure, everything, copies."""

from __future__ import annotations

import json
from pathlib import Path

from clawgym_env.authoring.adversarial.base import Attempt, Strategy, TaskView

__all__ = ["CopyInput", "Empty", "Everything", "FirstItemOnly", "Placeholder", "Skeleton"]


def _suffix(path: str) -> str:
    return Path(path).suffix.lower()


class Empty(Strategy):
    name = "empty"
    tries = "Creates every file the instruction asks for, empty (rewards for a file merely existing)."

    def attempts(self, task: TaskView) -> list[Attempt]:
        if not task.outputs:
            return []
        return [Attempt(self.name, dict.fromkeys(task.outputs, ""))]


_PLACEHOLDER = {
    ".json": '{"TODO": "TODO"}\n',
    ".py": "# TODO: implement\n",
    ".sh": "#!/bin/bash\n# TODO\n",
    ".csv": "TODO\n",
}


class Placeholder(Strategy):
    name = "placeholder"
    tries = "Writes TODO placeholders in every output and the final message (rewards for text being there)."

    def attempts(self, task: TaskView) -> list[Attempt]:
        files = {p: _PLACEHOLDER.get(_suffix(p), "TODO\n") for p in task.outputs}
        return [Attempt(self.name, files, "TODO: done. <answer>TODO</answer>")]


def _skeleton(path: str, task: TaskView, fill: object) -> str:
    suffix = _suffix(path)
    if suffix == ".json":
        keys = task.quoted_keys
        return json.dumps({k: fill for k in keys} if keys else fill, indent=2) + "\n"
    if suffix in (".csv", ".tsv"):
        header = task.csv_header
        if header is None:
            like = task.input_like(path)
            header = task.inputs[like].splitlines()[0] if like and task.inputs[like].strip() else "id"
        return header + "\n"
    if suffix == ".md":
        return "".join(f"{h}\n\n" for h in task.headings) or "".join(f"## {k}\n\n" for k in task.quoted_keys or ["Summary"])
    if suffix == ".py":
        like = task.inputs.get(path) or ""
        stubs = [ln.rstrip() + "\n    return None\n" for ln in like.splitlines() if ln.startswith("def ")]
        return "\n".join(stubs) or "def main():\n    return None\n"
    return "\n"


class Skeleton(Strategy):
    name = "skeleton"
    tries = (
        "Gives each output the right shape with no content: the CSV header with no rows, JSON with every "
        "quoted key set to empty/zero, Markdown headings with nothing under them, functions returning None."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        if not task.targets:
            return []
        return [
            Attempt(f"{self.name}:{tag}", {p: _skeleton(p, task, fill) for p in task.targets})
            for tag, fill in (("empty-values", []), ("zero-values", 0))
        ]


def _everything(path: str, task: TaskView, items: list[str]) -> str:
    suffix = _suffix(path)
    if suffix == ".json":
        value: object = items
        keys = task.quoted_keys
        return json.dumps({k: value for k in keys} if keys else value) + "\n"
    if suffix in (".csv", ".tsv"):
        header = task.csv_header
        body = [ln for ln in task.lines if "," in ln]
        return "\n".join(([header] if header else []) + body) + "\n"
    if suffix == ".md":  # every heading asked for, each holding everything
        text = "\n".join(f"- {x}" for x in items)
        return "".join(f"{h}\n\n{text}\n\n" for h in task.headings or ["## Summary"])
    return "\n".join(items) + "\n"


class Everything(Strategy):
    name = "everything"
    tries = (
        "Lists every candidate: every id, number or line of the inputs in every output and list, and "
        "every number in the final message (rewards recall with no precision)."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        out = []
        for tag, items in (("ids", task.ids), ("numbers", task.numbers), ("lines", task.lines)):
            if not items:
                continue
            files = {p: _everything(p, task, items) for p in task.outputs}
            if files or tag == "numbers":
                out.append(Attempt(f"{self.name}:{tag}", files, " ".join(items[:2000])))
        # answer tasks grade the last number: try the few cheapest guesses a policy would find
        for tag, n in (("most-frequent", task.numbers[:1]), ("largest", sorted(task.numbers, key=_num)[-1:])):
            if n:
                out.append(Attempt(f"{self.name}:{tag}-number", {}, f"<answer>{n[0]}</answer>"))
        return out


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("-inf")


class CopyInput(Strategy):
    name = "copy-input"
    tries = "Copies the most similar input file to each output, and the inputs into the final message."

    def attempts(self, task: TaskView) -> list[Attempt]:
        if not task.inputs:
            return []
        files = {}
        for p in task.outputs:
            like = task.input_like(p)
            if like is not None:
                files[p] = task.inputs[like]
        return [Attempt(self.name, files, "\n\n".join(task.inputs.values())[:50_000])]


class FirstItemOnly(Strategy):
    name = "first-item"
    tries = (
        "Keeps only the first record of the most similar input (header plus one row, one line, one id): "
        "the cheapest single item where a selection or optimum is asked."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        files = {}
        for p in task.outputs:
            like = task.input_like(p)
            if like is None:
                continue
            lines = [ln for ln in task.inputs[like].splitlines() if ln.strip()]
            if _suffix(p) == ".json":
                files[p] = json.dumps({k: task.ids[:1] for k in task.quoted_keys} if task.quoted_keys else task.ids[:1])
            else:
                files[p] = "\n".join(lines[:2] if _suffix(p) in (".csv", ".tsv") else lines[:1]) + "\n"
        if not files:
            return []
        return [Attempt(self.name, files, task.lines[0] if task.lines else "")]
