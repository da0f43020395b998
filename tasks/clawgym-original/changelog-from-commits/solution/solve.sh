set -e
mkdir -p output
python3 - <<'PY'
import re
pat = re.compile(r"(\w+) (\w+)(?:\(([^)]+)\))?(!)?: (.+)")
sections = {"### Breaking Changes": [], "### Features": [], "### Bug Fixes": [], "### Performance": []}
kinds = {"feat": "### Features", "fix": "### Bug Fixes", "perf": "### Performance"}
breaking = feat = False
for line in open("commits.txt"):
    m = pat.match(line.strip())
    if not m:
        continue
    sha, typ, scope, bang, subject = m.groups()
    entry = (f"- **{scope}:** " if scope else "- ") + f"{subject} ({sha[:7]})"
    if bang:
        breaking = True; sections["### Breaking Changes"].append(entry)
    elif typ in kinds:
        feat |= typ == "feat"; sections[kinds[typ]].append(entry)
major, minor, patch = map(int, open("VERSION").read().split("."))
new = f"{major + 1}.0.0" if breaking else f"{major}.{minor + 1}.0" if feat else f"{major}.{minor}.{patch + 1}"
open("VERSION", "w").write(new + "\n")
out = [f"## {new}"]
for title, entries in sections.items():
    if entries:
        out += ["", title] + entries
open("output/CHANGELOG.md", "w").write("\n".join(out) + "\n")
PY
