"""Grader for rename-function: the new name works, the alias warns, no old references remain, tests pass."""
import json
import re
import subprocess
import sys
from pathlib import Path

PROBE = r'''
import json, sys, warnings
sys.path.insert(0, ".")
out = {"new_name": False, "alias_warns": False}
try:
    from shop.users import get_user
    from shop.orders import price_for
    from shop.reports import greeting
    out["new_name"] = get_user(1)["name"] == "Ravi" and price_for(1, 100) == 90.0 and greeting(2) == "Hello, Mei!"
    from shop.users import get_usr
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        same = get_usr(2) == get_user(2)
    out["alias_warns"] = same and any(issubclass(w.category, DeprecationWarning) for w in caught)
except Exception:
    pass
print(json.dumps(out))
'''


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
    try:
        r = subprocess.run([sys.executable, "-c", PROBE], cwd=ws, capture_output=True, text=True, timeout=30)
        probe = json.loads(r.stdout.strip().splitlines()[-1])
        scores["new_name_works"] = 1.0 if probe["new_name"] else 0.0
        scores["alias_warns"] = 1.0 if probe["alias_warns"] else 0.0
    except Exception:
        pass
    try:
        if scores["new_name_works"] and _old_refs(ws) == 0:
            scores["no_old_references"] = 1.0
    except Exception:
        pass
    try:
        r = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."], cwd=ws,
                           capture_output=True, text=True, timeout=60)
        if r.returncode == 0 and scores["new_name_works"]:
            scores["tests_pass"] = 1.0
    except Exception:
        pass
    return scores
