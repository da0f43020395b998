"""Strategies that hand back degenerate valid shapes: structure with nothing in it, or everything masked."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from clawgym_env.authoring.adversarial.base import Attempt, Strategy, TaskView

__all__ = ["BlanketMask", "Hollow", "sql_columns"]

_IDENT = re.compile(r"(?:and\s+)?`?\"?([A-Za-z_]\w*)\"?`?")


def sql_columns(instruction: str, path: str, others: list[str]) -> list[str]:
    """The result columns the instruction lists for the query file ``path`` ("... with columns a, b (...), c"),
    read from the text between its mention and the next output's; [] when it lists none."""
    start = instruction.find(path)
    if start < 0:
        return []
    ends = [i for o in others if o != path and (i := instruction.find(o, start + len(path))) > 0]
    segment = instruction[start + len(path) : min(ends, default=len(instruction))]
    while re.search(r"\([^()]*\)", segment):
        segment = re.sub(r"\([^()]*\)", "", segment)
    m = re.search(r"\bcolumns?\b:?\s*(.*)", segment, flags=re.DOTALL)
    if not m:
        return []
    cols: list[str] = []
    for chunk in m.group(1).split(","):
        ident = _IDENT.fullmatch(chunk.strip().rstrip("."))
        if ident is None:
            break
        cols.append(ident.group(1))
    return cols if len(cols) >= 2 else []


def _empty_select(cols: list[str]) -> str:
    return "SELECT " + ", ".join(f"NULL AS {c}" for c in cols) + " WHERE 0;\n"


class Hollow(Strategy):
    name = "hollow"
    tries = (
        "Gives every output the reference solution's structure and none of its substance: the right columns "
        "with no rows (the CSV header, a query selecting the asked-for columns that returns nothing, JSON with "
        "every collection empty), or every row kept with no text in it (blank cells, only markup and [TAG] "
        "placeholders left)."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        sql = {
            p: _empty_select(cols)
            for p in task.targets
            if p.endswith(".sql") and (cols := sql_columns(task.spec.instruction, p, task.targets))
        }
        return self.variants(
            {
                "no-rows": {r.path: r.no_rows for r in task.reference if r.no_rows is not None} | sql,
                "blank": {r.path: r.hollow for r in task.reference if r.hollow is not None},
            }
        )


_TAG_RE = re.compile(r"\[[A-Z][A-Z0-9_ ]{1,30}\]")
_TOKEN_RE = re.compile(r"\S+@\S+\w|\w+")


def _tags(task: TaskView) -> list[str]:
    return list(dict.fromkeys(_TAG_RE.findall(task.spec.instruction))) or ["[REDACTED]"]


def _source(task: TaskView, path: str) -> str | None:
    """The input an output copies: itself when edited in place, else the one input of the same file name."""
    if path in task.inputs:
        return path
    same = [p for p in task.inputs if PurePosixPath(p).name == PurePosixPath(path).name]
    return same[0] if len(same) == 1 else None


class BlanketMask(Strategy):
    name = "blanket-mask"
    tries = (
        "Writes each output that is a copy of an input with everything masked: every word and number "
        "replaced by the instruction's placeholders, or each line by all of them (nothing that should go "
        "remains, and nothing else is kept)."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        pairs = {p: src for p in task.targets if (src := _source(task, p)) is not None}
        if not pairs:
            return []
        tags = _tags(task)

        def every_token(text: str) -> str:
            counter = iter(range(1 << 30))
            return _TOKEN_RE.sub(lambda _: tags[next(counter) % len(tags)], text)

        def every_line(text: str) -> str:
            return "".join((" ".join(tags) if ln.strip() else "") + "\n" for ln in text.splitlines())

        return [
            Attempt(f"{self.name}:{tag}", {p: fn(task.inputs[src]) for p, src in pairs.items()})
            for tag, fn in (("every-token", every_token), ("every-line", every_line))
        ]
