set -e
mkdir -p output
python3 - <<'PY'
import re
from pathlib import Path
terms = {}
for p in sorted(Path("docs").glob("*.md")):
    for line in p.read_text().splitlines():
        m = re.match(r"^(?:- )?\*\*([^*]+)\*\*: (.+)$", line.strip())
        if m and m.group(1).lower() not in {t.lower() for t in terms}:
            terms[m.group(1)] = m.group(2)
out = ["# Glossary", ""] + [f"- **{t}**: {d}" for t, d in sorted(terms.items(), key=lambda kv: kv[0].lower())]
open("output/glossary.md", "w").write("\n".join(out) + "\n")
PY
