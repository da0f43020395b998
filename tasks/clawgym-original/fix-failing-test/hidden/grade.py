"""Grader for fix-failing-test: every case (the visible tests' and extra hidden ones) is run in the
grading jail (``clawgym_grading``: it cannot read this file, reach this process or write the
workspace) by a probe that emits plain JSON values; the comparison happens here, so objects the
agent's code returns (one equal to anything, say) and test-runner patches cannot pass it."""
import hashlib
import json
from pathlib import Path

from clawgym_grading import agent_values

TESTS_SHA256 = "f88cdbb37c3b055cacfc39a6f06d18d58ffdf43cdecfc4002fc00ba0d613ab55"
VISIBLE = [(([(1000, 1), (250, 2)], 0, 0), 1500), (([(1005, 1)], 0, 10), 1106), (([(1000, 2)], 15, 20), 2040)]
HIDDEN = [
    (([(999, 3)], 0, 0), 2997),
    (([(1000, 1)], 10, 0), 900),
    (([(1234, 1)], 0, 5), 1296),        # 61.7 -> 62
    (([(1000, 3)], 25, 0), 2250),
    (([(3333, 3)], 10, 7), 9629),       # 9999 - 1000 = 8999; + 629.93 -> 630
    (([], 10, 10), 0),
]
PROBE = r'''
import json, sys
sys.path.insert(0, ".")
cases = json.loads(sys.argv[1])
out = []
try:
    from invoicing.totals import invoice_total, line_total
    out.append(line_total(250, 4))
    for (lines, disc, tax), _ in cases:
        out.append(invoice_total([tuple(x) for x in lines], discount_pct=disc, tax_pct=tax))
except Exception as exc:
    out = None
emit(out)
'''


def _values(ws):
    """The values the agent's code computed, as plain JSON (None when it crashed or printed none)."""
    values = agent_values(PROBE, json.dumps(VISIBLE + HIDDEN), cwd=ws, timeout=60)
    ok = isinstance(values, list) and len(values) == 1 + len(VISIBLE) + len(HIDDEN)
    return values if ok and all(type(v) is int for v in values) else None


def grade(transcript, workspace_path):
    ws = Path(workspace_path)
    scores = {"visible_tests_pass": 0.0, "hidden_cases_pass": 0.0, "tests_untouched": 0.0}
    values = _values(ws)
    if values is None:
        return scores
    visible, hidden = values[: 1 + len(VISIBLE)], values[1 + len(VISIBLE):]
    if visible == [1000] + [want for _, want in VISIBLE]:
        scores["visible_tests_pass"] = 1.0
    if hidden == [want for _, want in HIDDEN]:
        scores["hidden_cases_pass"] = 1.0
    try:
        digest = hashlib.sha256((ws / "tests" / "test_totals.py").read_bytes()).hexdigest()
        if digest == TESTS_SHA256 and scores["visible_tests_pass"]:
            scores["tests_untouched"] = 1.0
    except Exception:
        pass
    return scores
