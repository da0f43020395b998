"""Procedurally generated multi-step workspace tasks: the solution needs 2-3 dependent shell commands.

Why: in the one-command suites (``procgen``) an episode is two model calls (the command, then
"Done."), so a branch taken mid-episode can only resample the closing message and reward is decided
before any branch point. Here each later command needs what an earlier one printed (read a name, then
act on that file; find which file holds a word, then copy it; list a folder, then move what is in
it; follow a chain of two files), so the call where a policy goes wrong can lie after call 0, and a
branch at that call resamples a decision that changes the reward (the branching-vs-chain comparison
in ``experiments/branching``).

Same machinery as ``procgen``: disjoint train/test parameter pools, a hidden all-or-nothing grader
holding the expected end state, ``solution/solve.sh`` (the steps, one per line) and
``metadata.procgen.steps`` (what the expert policy of ``trainers.tree_sft.expert`` runs, one call
each, after seeing the previous output). ``python -m clawgym_env.task.procgen_multistep [OUT]``
(re)writes ``OUT/procgen-multistep-train`` and ``OUT/procgen-multistep-test``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from clawgym_env.task.procgen import Variant, _lines, _Pools, write_suites

__all__ = ["PREFIX", "TEMPLATES", "TEST_PER_TEMPLATE", "TRAIN_PER_TEMPLATE", "write"]

PREFIX = "procgen-multistep"
TRAIN_PER_TEMPLATE = 8
TEST_PER_TEMPLATE = 2


def _others(p: _Pools, k: int, *avoid: int) -> list[int]:
    """``k`` distinct 3-digit numbers not in ``avoid`` (decoys; not parameters)."""
    return [v for v in p.rng.sample(range(100, 1000), k + len(avoid)) if v not in avoid][:k]


def _v(
    template: str,
    instruction: str,
    steps: list[str],
    workspace: dict[str, str],
    checks: list[dict],
    params: dict,
    difficulty: str = "medium",
) -> Variant:
    return Variant(template, instruction, "\n".join(steps), workspace, checks, params, difficulty, steps=steps)


def _t_pointer_delete(p: _Pools) -> Variant:
    n = p.num("pointer.name")[0]
    decoys = _others(p, 2, n)
    ws = {"target.txt": f"tmp_{n}.txt\n", f"tmp_{n}.txt": "scratch\n", **{f"tmp_{d}.txt": "scratch\n" for d in decoys}}
    keep = [{"op": "text", "path": rel, "text": body} for rel, body in ws.items() if rel != f"tmp_{n}.txt"]
    return _v(
        "pointer-delete",
        "The file target.txt holds the name of one file. Delete that file and keep every other file.",
        ["cat target.txt", f"rm tmp_{n}.txt"],
        ws,
        [{"op": "absent", "path": f"tmp_{n}.txt"}, *keep],
        {"name": n},
    )


def _t_code_to_name(p: _Pools) -> Variant:
    v = p.num("code.value")[0]
    return _v(
        "code-to-name",
        "Read the number in code.txt and create a file named after it (that number followed by .txt) containing the word found.",
        ["cat code.txt", f"echo found > {v}.txt"],
        {"code.txt": f"{v}\n"},
        [{"op": "text", "path": f"{v}.txt", "text": "found\n"}, {"op": "text", "path": "code.txt", "text": f"{v}\n"}],
        {"value": v},
    )


def _t_inbox_move(p: _Pools) -> Variant:
    n = p.num("inbox.name")[0]
    body = _lines(_others(p, 3, n))
    return _v(
        "inbox-move",
        "The folder inbox holds exactly one file. Move that file out of inbox to done.txt.",
        ["ls inbox", f"mv inbox/msg_{n}.txt done.txt"],
        {f"inbox/msg_{n}.txt": body},
        [{"op": "text", "path": "done.txt", "text": body}, {"op": "absent", "path": f"inbox/msg_{n}.txt"}],
        {"name": n},
    )


def _t_find_copy(p: _Pools) -> Variant:
    n = p.num("find.name")[0]
    decoys = _others(p, 3, n)
    notes = {f"notes/note_{d}.txt": f"plain {d}\n" for d in decoys}
    notes[f"notes/note_{n}.txt"] = f"KEY {n}\n"
    ws = dict(sorted(notes.items()))
    return _v(
        "find-copy",
        "Exactly one file in the folder notes contains the word KEY. Copy that file to found.txt.",
        ["grep -l KEY notes/*", f"cp notes/note_{n}.txt found.txt"],
        ws,
        [
            {"op": "text", "path": "found.txt", "text": f"KEY {n}\n"},
            *({"op": "text", "path": rel, "text": body} for rel, body in ws.items()),
        ],
        {"name": n},
    )


def _t_follow_chain(p: _Pools) -> Variant:
    a, v = p.num("chain.name")[0], p.num("chain.value")[0]
    b, w = _others(p, 2, a, v)
    ws = {"start.txt": f"step_{a}.txt\n", f"step_{a}.txt": f"{v}\n", f"step_{b}.txt": f"{w}\n"}
    return _v(
        "follow-chain",
        "The file start.txt names another file, and that file holds a number. Write that number to answer.txt.",
        ["cat start.txt", f"cat step_{a}.txt", f"echo {v} > answer.txt"],
        ws,
        [{"op": "number", "path": "answer.txt", "value": v}],
        {"name": a, "value": v},
        "hard",
    )


def _t_lookup_append(p: _Pools) -> Variant:
    n, v = p.num("lookup.name")[0], p.num("lookup.value")[0]
    d = _others(p, 1, n, v)[0]
    old = _lines(_others(p, 2, n, v, d))
    ws = {"config.txt": f"log=log_{n}.txt\n", "value.txt": f"{v}\n", f"log_{n}.txt": old, f"log_{d}.txt": old}
    return _v(
        "lookup-append",
        "config.txt names a log file (log=...). Append the number in value.txt as a new last line of that log file.",
        ["cat config.txt", "cat value.txt", f"echo {v} >> log_{n}.txt"],
        ws,
        [{"op": "text", "path": f"log_{n}.txt", "text": old + f"{v}\n"}, {"op": "text", "path": f"log_{d}.txt", "text": old}],
        {"name": n, "value": v},
        "hard",
    )


TEMPLATES: dict[str, Callable[[_Pools], Variant]] = {
    "pointer-delete": _t_pointer_delete,
    "code-to-name": _t_code_to_name,
    "inbox-move": _t_inbox_move,
    "find-copy": _t_find_copy,
    "follow-chain": _t_follow_chain,
    "lookup-append": _t_lookup_append,
}
"""Template name -> variant maker; 2-3 steps each, a later step using what an earlier one printed."""


def write(out_dir: Path) -> list[Path]:
    """(Re)write both multi-step suites under ``out_dir``."""
    return write_suites(
        out_dir,
        train_per_template=TRAIN_PER_TEMPLATE,
        test_per_template=TEST_PER_TEMPLATE,
        prefix=PREFIX,
        kind="multi-step (2-3 dependent commands)",
        generator="clawgym_env.task.procgen_multistep",
        templates=TEMPLATES,
    )


if __name__ == "__main__":
    from clawgym_env.task.suite import repo_tasks_dir

    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else repo_tasks_dir()):
        print(f"wrote {path}")
