"""Code checks for budget-variance-report: variance figures, top overruns and report structure."""
import json
import re
from pathlib import Path

VAR = {"Engineering": (41500, 5.1), "Sales": (42300, 10.3), "Marketing": (58700, 22.6),
       "Customer Support": (-6600, -3.5), "Finance": (-900, -0.8), "People": (9800, 10.3),
       "Facilities": (21000, 14.0), "Legal": (-5500, -6.9)}
TOP = ["Marketing", "Sales", "Engineering"]
SECTIONS = ["Overview", "Variance by department", "Top overruns", "Recommendations"]


def _sections(text):
    out, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^##\s+(.+?)\s*$", line)
        if m:
            current = m.group(1).strip()
            out[current] = []
        elif current:
            out[current].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def _has_number(text, value):
    """``value`` written in ``text`` as a whole number (58700, 58,700, +58 700, 58.700)."""
    digits = re.sub(r"(?<=\d)[,. \u202f](?=\d{3}\b)", "", text)
    return re.search(rf"(?<![\d.]){value}(?![\d]|\.\d)", digits) is not None


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"department_variances": 0.0, "total_variance": 0.0, "report_sections": 0.0,
              "top_overruns_ordered": 0.0, "department_table": 0.0}
    try:
        data = json.loads((out / "variances.json").read_text(encoding="utf-8"))
        deps = data["departments"]
        if set(deps) == set(VAR) and all(
            int(round(float(deps[k]["variance_eur"]))) == e and abs(float(deps[k]["variance_pct"]) - p) < 0.051
            for k, (e, p) in VAR.items()
        ):
            scores["department_variances"] = 1.0
        if int(round(float(data["total_variance_eur"]))) == 160300 and abs(float(data["total_variance_pct"]) - 7.5) < 0.051:
            scores["total_variance"] = 1.0
    except Exception:
        pass
    try:
        text = (out / "variance_report.md").read_text(encoding="utf-8")
    except Exception:
        return scores
    sec = _sections(text)
    if all(s in sec for s in SECTIONS):
        scores["report_sections"] = 1.0
    top = sec.get("Top overruns", "")
    # the first three departments named are the top three, in order: every name listed in some order is not a pick
    named = sorted((m.start(), name) for name in VAR for m in re.finditer(re.escape(name), top))
    firsts = list(dict.fromkeys(name for _, name in named))
    if firsts[:3] == TOP:
        scores["top_overruns_ordered"] = 1.0
    rows = [ln for ln in sec.get("Variance by department", "").splitlines() if ln.strip().startswith("|")]
    # a table of names without their figures is structure: each department's row must give its variance
    if all(any(name in r and _has_number(r, abs(eur)) for r in rows) for name, (eur, _) in VAR.items()):
        scores["department_table"] = 1.0
    # the headings alone are free: they count once the sections hold the right table and overruns
    if not (scores["department_table"] and scores["top_overruns_ordered"]):
        scores["report_sections"] = 0.0
    return scores
