set -e
mkdir -p output
python3 - <<'PY'
import re
lines = open("docs/runbook.md").read().splitlines()
toc, in_code = [], False
for ln in lines:
    if ln.startswith("```"):
        in_code = not in_code
    m = None if in_code else re.match(r"(#{2,3}) (.+)", ln)
    if m:
        text = m.group(2).strip()
        anchor = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        toc.append(("  " if len(m.group(1)) == 3 else "") + f"- [{text}](#{anchor})")
# the first paragraph after the title ends at the first blank line after it
title = 0
start = next(i for i in range(title + 1, len(lines)) if lines[i].strip())
end = next(i for i in range(start, len(lines)) if not lines[i].strip())
out = lines[:end] + ["", "## Contents", ""] + toc + lines[end:]
open("output/runbook.md", "w").write("\n".join(out) + "\n")
PY
