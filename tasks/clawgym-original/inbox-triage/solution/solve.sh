set -e
mkdir -p output
python3 - <<'PY'
import json
vips = {"ceo@harborline.example", "cfo@harborline.example"}
out = {"urgent": [], "billing": [], "newsletter": [], "other": []}
for line in open("input/inbox.jsonl"):
    if not line.strip():
        continue
    m = json.loads(line)
    subj, body, sender = m["subject"].lower(), m["body"].lower(), m["from"].lower()
    if sender in vips or "urgent" in subj:
        folder = "urgent"
    elif any(w in subj or w in body for w in ("invoice", "receipt")):
        folder = "billing"
    elif sender.split("@")[1].startswith("newsletter.") or "unsubscribe" in body:
        folder = "newsletter"
    else:
        folder = "other"
    out[folder].append(m["id"])
json.dump({k: sorted(v) for k, v in out.items()}, open("output/triage.json", "w"), indent=2)
PY
