"""Grader for rename-function: the new name works, the alias warns, no old references remain, tests pass.
The agent's code runs only in the grading jail (``clawgym_grading``); its values are compared here."""
import re
from pathlib import Path

from clawgym_grading import agent_values, run_agent

PROBE = r'''
import json, sys, warnings
sys.path.insert(0, ".")
out = None
try:
    from shop.users import get_user
    from shop.orders import price_for
    from shop.reports import greeting
    values = {"user1": get_user(1), "price": price_for(1, 100), "greeting": greeting(2), "user2": get_user(2)}
    try:
        from shop.users import get_usr
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            values["alias"] = get_usr(2)
        values["warned"] = sorted({w.category.__name__ for w in caught if issubclass(w.category, DeprecationWarning)})
    except Exception:
        values["alias"], values["warned"] = None, []
    out = values
except Exception:
    pass
emit(out)
'''


def _probe(ws):
    """What the agent's code returned, as plain JSON values (None if it crashed or printed nothing)."""
    out = agent_values(PROBE, cwd=ws, timeout=30)
    return out if isinstance(out, dict) else None


def _old_refs(ws):
    """Lines mentioning get_usr outside the alias definition in shop/users.py."""
    count = 0
    for path in list((ws / "shop").glob("*.py")) + list((ws / "tests").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name == "users.py":
            text = re.sub(r"def get_usr\(.*?(?=\ndef |\Z)", "", text, flags=re.S)
        count += len(re.findall(r"\bget_usr\b", text))
    return count


def grade(transcript, workspace_path):
    ws = Path(workspace_path)
    scores = {"new_name_works": 0.0, "alias_warns": 0.0, "no_old_references": 0.0, "tests_pass": 0.0}
    probe = _probe(ws)
    if probe is None:
        return scores
    user1, user2 = probe.get("user1"), probe.get("user2")
    if isinstance(user1, dict) and user1.get("name") == "Ravi" and probe.get("price") == 90.0 \
            and probe.get("greeting") == "Hello, Mei!" and isinstance(user2, dict):
        scores["new_name_works"] = 1.0
        if probe.get("alias") == user2 and probe.get("warned") == ["DeprecationWarning"]:
            scores["alias_warns"] = 1.0
    try:
        if scores["new_name_works"] and _old_refs(ws) == 0:
            scores["no_old_references"] = 1.0
    except Exception:
        pass
    try:
        r = run_agent(["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."], ws, timeout=60)
        if r.returncode == 0 and scores["new_name_works"]:
            scores["tests_pass"] = 1.0
    except Exception:
        pass
    return scores
