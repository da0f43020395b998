"""Driver: passes per results folder of each run (status 'passed' over attempts), by category for the losses/gains."""
import json
import sys
from collections import defaultdict
from pathlib import Path

root = Path(sys.argv[1])
for run in sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("run")):
    for folder in sorted(p for p in run.iterdir() if (p / "attempts").is_dir()):
        recs = [json.loads(f.read_text()) for f in (folder / "attempts").rglob("*.json")]
        by = defaultdict(lambda: [0, 0])
        for r in recs:
            by[r["category"]][0] += r["status"] == "passed"
            by[r["category"]][1] += 1
        passed = sum(v[0] for v in by.values())
        errs = sum(r["status"] == "error" for r in recs)
        cats = " ".join(f"{c}:{a}/{b}" for c, (a, b) in sorted(by.items()) if a)
        print(f"{run.name} {folder.name:20s} {passed}/{len(recs)} = {100 * passed / max(1, len(recs)):.1f}%  err {errs}  {cats}")
