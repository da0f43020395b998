"""Procedurally generated read-then-act tasks: the multi-step templates and more compositions of the same kind.

Why: to ask whether RL through a harness teaches a skill that supervised data did not, the skill must
come in task types that can be held out whole. Every template here needs the same skill, reading
something with one command (``cat``, ``ls``, ``grep -l``, ``wc -l``) and acting on what it printed with
the next (``rm``, ``cp``, ``mv``, ``echo >``, ``echo >>``), each in its own combination of read and
act, so a model trained on some templates can be measured on templates it never saw at all. The
one-command skills themselves (``procgen``) are what supervised data teaches.

The suites hold ``procgen_multistep``'s six templates (their variants are the same tasks as in
``procgen-multistep-*``: same pools, same seeds) and ten more, three of them three-command chains.
Same machinery as ``procgen``: disjoint train/test parameter pools, a hidden all-or-nothing grader
holding the expected end state, ``solution/solve.sh`` and ``metadata.procgen.steps`` (the expert's
commands). ``python -m clawgym_env.task.procgen_compose [OUT]`` (re)writes ``OUT/procgen-compose-train``
and ``OUT/procgen-compose-test``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from clawgym_env.task.procgen import Variant, _lines, _Pools, write_suites
from clawgym_env.task.procgen_multistep import TEMPLATES as MULTISTEP
from clawgym_env.task.procgen_multistep import _others, _v

__all__ = ["PREFIX", "TEMPLATES", "TEST_PER_TEMPLATE", "TRAIN_PER_TEMPLATE", "write"]

PREFIX = "procgen-compose"
TRAIN_PER_TEMPLATE = 6
TEST_PER_TEMPLATE = 3


def _t_pointer_copy(p: _Pools) -> Variant:
    n = p.num("pcopy.name")[0]
    decoy = _others(p, 1, n)[0]
    body, other = _lines(_others(p, 3, n, decoy)), _lines(_others(p, 3, n, decoy))
    ws = {"source.txt": f"data_{n}.txt\n", f"data_{n}.txt": body, f"data_{decoy}.txt": other}
    return _v(
        "pointer-copy",
        "The file source.txt holds the name of one file. Copy that file to backup.txt.",
        ["cat source.txt", f"cp data_{n}.txt backup.txt"],
        ws,
        [{"op": "text", "path": "backup.txt", "text": body}, {"op": "text", "path": f"data_{n}.txt", "text": body}],
        {"name": n},
    )


def _t_pointer_append(p: _Pools) -> Variant:
    n, v = p.num("pappend.nums", 2)  # one pool: no train value is a test value
    decoy = _others(p, 1, n, v)[0]
    old = _lines(_others(p, 2, n, v, decoy))
    ws = {"target.txt": f"log_{n}.txt\n", f"log_{n}.txt": old, f"log_{decoy}.txt": old}
    return _v(
        "pointer-append",
        f"The file target.txt holds the name of a log file. Append a new last line with the number {v} to that log file.",
        ["cat target.txt", f"echo {v} >> log_{n}.txt"],
        ws,
        [{"op": "text", "path": f"log_{n}.txt", "text": old + f"{v}\n"}, {"op": "text", "path": f"log_{decoy}.txt", "text": old}],
        {"name": n, "value": v},
    )


def _t_pointer_rename(p: _Pools) -> Variant:
    n = p.num("prename.name")[0]
    decoy = _others(p, 1, n)[0]
    body = _lines(_others(p, 3, n, decoy))
    ws = {"old.txt": f"draft_{n}.txt\n", f"draft_{n}.txt": body, f"draft_{decoy}.txt": "keep\n"}
    return _v(
        "pointer-rename",
        "The file old.txt holds the name of one file. Rename that file to final.txt.",
        ["cat old.txt", f"mv draft_{n}.txt final.txt"],
        ws,
        [
            {"op": "text", "path": "final.txt", "text": body},
            {"op": "absent", "path": f"draft_{n}.txt"},
            {"op": "text", "path": f"draft_{decoy}.txt", "text": "keep\n"},
        ],
        {"name": n},
    )


def _t_count_to_name(p: _Pools) -> Variant:
    k = p.draw("cname.k", list(range(3, 40)))[0]
    words = ["apple", "pear", "plum", "fig", "lime", "kiwi"]
    body = _lines(p.rng.choices(words, k=k))
    return _v(
        "count-to-name",
        "Count the lines of items.txt, then create a file named after that count (the number "
        "followed by .txt) containing the word counted.",
        ["wc -l items.txt", f"echo counted > {k}.txt"],
        {"items.txt": body},
        [{"op": "text", "path": f"{k}.txt", "text": "counted\n"}],
        {"k": k},
    )


def _marked(p: _Pools, pool: str, path: str, plain: str, marked: str) -> tuple[int, dict[str, str]]:
    """A folder of four files (``path`` with ``{}`` for a number), only one of them holding the ``marked`` line."""
    n = p.num(pool)[0]
    ws = {path.format(d): plain.format(d) for d in _others(p, 3, n)}
    ws[path.format(n)] = marked.format(n)
    return n, dict(sorted(ws.items()))


def _t_find_delete(p: _Pools) -> Variant:
    n, ws = _marked(p, "fdel.name", "logs/log_{}.txt", "INFO ok {}\n", "ERROR failed {}\n")
    return _v(
        "find-delete",
        "Exactly one file in the folder logs contains the word ERROR. Delete that file and keep every other file.",
        ["grep -l ERROR logs/*", f"rm logs/log_{n}.txt"],
        ws,
        [
            {"op": "absent", "path": f"logs/log_{n}.txt"},
            *({"op": "text", "path": rel, "text": body} for rel, body in ws.items() if rel != f"logs/log_{n}.txt"),
        ],
        {"name": n},
    )


def _t_inbox_copy(p: _Pools) -> Variant:
    n = p.num("icopy.name")[0]
    body = _lines([f"note {v}" for v in _others(p, 3, n)])  # not numbers alone: listing the inputs' numbers is no copy
    other = _lines([f"memo {v}" for v in _others(p, 2, n)])  # another input: copying every input line is no copy
    v = _v(
        "inbox-copy",
        "The folder drop holds exactly one file. Copy that file to copy.txt and keep the original.",
        ["ls drop", f"cp drop/item_{n}.txt copy.txt"],
        {f"drop/item_{n}.txt": body, "memo.txt": other},
        [{"op": "text", "path": "copy.txt", "text": body}, {"op": "text", "path": f"drop/item_{n}.txt", "text": body}],
        {"name": n},
    )
    v.exploit_exempt = {"copy-input": "copying the one file of drop is the task (finding it is the step before)"}
    return v


def _t_inbox_delete(p: _Pools) -> Variant:
    n = p.num("idel.name")[0]
    return _v(
        "inbox-delete",
        "The folder trash holds exactly one file. Delete that file and keep the folder.",
        ["ls trash", f"rm trash/old_{n}.txt"],
        {f"trash/old_{n}.txt": "scratch\n"},
        [{"op": "absent", "path": f"trash/old_{n}.txt"}, {"op": "dir", "path": "trash"}],
        {"name": n},
    )


def _t_code_to_folder(p: _Pools) -> Variant:
    v = p.num("cfolder.value")[0]
    return _v(
        "code-to-folder",
        "Read the number in id.txt and create a folder named run_ followed by that number (for example run_123).",
        ["cat id.txt", f"mkdir run_{v}"],
        {"id.txt": f"{v}\n"},
        [{"op": "dir", "path": f"run_{v}"}, {"op": "text", "path": "id.txt", "text": f"{v}\n"}],
        {"value": v},
    )


def _t_chain_delete(p: _Pools) -> Variant:
    a, n = p.num("cdel.nums", 2)
    b, d = _others(p, 2, a, n)
    ws = {
        "start.txt": f"next_{a}.txt\n",
        f"next_{a}.txt": f"tmp_{n}.txt\n",
        f"next_{b}.txt": f"tmp_{d}.txt\n",
        f"tmp_{n}.txt": "scratch\n",
        f"tmp_{d}.txt": "scratch\n",
    }
    return _v(
        "chain-delete",
        "The file start.txt names another file, and that file names the file to delete. Delete it and keep every other file.",
        ["cat start.txt", f"cat next_{a}.txt", f"rm tmp_{n}.txt"],
        ws,
        [
            {"op": "absent", "path": f"tmp_{n}.txt"},
            *({"op": "text", "path": rel, "text": body} for rel, body in ws.items() if rel != f"tmp_{n}.txt"),
        ],
        {"hop": a, "name": n},
        "hard",
    )


def _t_find_rename(p: _Pools) -> Variant:
    n, ws = _marked(p, "fren.name", "drafts/d_{}.txt", "todo {}\n", "FINAL {}\n")
    return _v(
        "find-rename",
        "Exactly one file in the folder drafts contains the word FINAL. Move that file out of drafts to release.txt.",
        ["grep -l FINAL drafts/*", f"mv drafts/d_{n}.txt release.txt"],
        ws,
        [{"op": "text", "path": "release.txt", "text": f"FINAL {n}\n"}, {"op": "absent", "path": f"drafts/d_{n}.txt"}],
        {"name": n},
        "hard",
    )


COMPOSE: dict[str, Callable[[_Pools], Variant]] = {
    "pointer-copy": _t_pointer_copy,
    "pointer-append": _t_pointer_append,
    "pointer-rename": _t_pointer_rename,
    "count-to-name": _t_count_to_name,
    "find-delete": _t_find_delete,
    "inbox-copy": _t_inbox_copy,
    "inbox-delete": _t_inbox_delete,
    "code-to-folder": _t_code_to_folder,
    "chain-delete": _t_chain_delete,
    "find-rename": _t_find_rename,
}
TEMPLATES: dict[str, Callable[[_Pools], Variant]] = {**MULTISTEP, **COMPOSE}
"""Template name -> variant maker: ``procgen_multistep``'s six, then the ten compositions added here."""


def write(out_dir: Path) -> list[Path]:
    """(Re)write both suites under ``out_dir``."""
    return write_suites(
        out_dir,
        train_per_template=TRAIN_PER_TEMPLATE,
        test_per_template=TEST_PER_TEMPLATE,
        prefix=PREFIX,
        kind="read-then-act (2-3 dependent commands)",
        generator="clawgym_env.task.procgen_compose",
        templates=TEMPLATES,
    )


if __name__ == "__main__":
    from clawgym_env.task.suite import repo_tasks_dir

    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else repo_tasks_dir()):
        print(f"wrote {path}")
