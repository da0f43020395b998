"""Driver: per-folder Pass@1 of the collected results and experiment.json (settings, stage times, figures)."""
import collections
import json
import sys
from pathlib import Path

root = Path(sys.argv[1])
out = {}
for run in ("run1", "run2"):
    figs = {}
    for folder in sorted((root / run).iterdir()):
        if not (folder / "attempts").is_dir():
            continue
        recs = [json.loads(p.read_text()) for p in (folder / "attempts").glob("*.json")]
        per = collections.defaultdict(list)
        for r in recs:
            per[r["category"]].append(r["score"])
        ok = sum(r["score"] >= 1.0 for r in recs)
        figs[folder.name] = {"passed": f"{ok}/{len(recs)} ({100 * ok / len(recs):.1f}%)",
                             "per_template": {c: f"{int(sum(v))}/{len(v)}" for c, v in sorted(per.items())},
                             "errors": sum(r["status"] == "error" for r in recs)}
    out[run] = figs
print(json.dumps(out, indent=1))
