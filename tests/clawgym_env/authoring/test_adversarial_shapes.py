"""Shape without substance: output discovery and the strategies that play degenerate shapes, hedges and
unsupported claims (`tasks check --adversarial`).

The graders under attack are small ones written here, each with the flaw a strategy is meant to find,
next to a fixed one the same strategies must not lift; every attempt runs through real bwrap sandboxes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from clawgym_env.authoring.adversarial import TaskView
from clawgym_env.authoring.adversarial.claims import Hedge, UnsupportedClaims, number_sweep
from clawgym_env.authoring.adversarial.degenerate import BlanketMask, Hollow, sql_columns
from clawgym_env.authoring.adversarial.outputs import Empty, Placeholder, Skeleton
from clawgym_env.authoring.adversarial.paths import find_mentions
from clawgym_env.authoring.adversarial.shape import Faker, fake, hollow, input_pool, no_rows, tokens_of, words_of
from clawgym_env.authoring.check import check_suite
from clawgym_env.task import load_suite
from clawgym_env.task.loader import load_task_dir


def test_instruction_outputs_are_files_folders_and_extensionless_names_not_patterns() -> None:
    text = (
        "Read tickets/ and write a copy of each to output/redacted/<same file name>, the totals to "
        "/workspace/output/totals.json and a summary to output/summary. Bump VERSION. Old backups are named "
        "backup_YYYY-MM-DD.tar; never touch /etc/hosts. Reminders go to output/reminders/<invoice>.txt. "
        "Compare A/B and/or keep 3.0.0, e.g. in reports/. Package the code as output/src, with "
        "output/src/app/main.py. Also see Yes/YES/ and ltv/cac/."
    )
    found = find_mentions(text, "/workspace", {"VERSION", "tickets/a.txt"}, {"tickets"})
    assert found.files == ["output/totals.json", "output/summary", "VERSION", "output/src/app/main.py"]
    assert found.folders == ["tickets", "output/redacted", "output/reminders", "reports", "output/src"]
    assert found.patterns == ["output/redacted/<same file name>", "backup_YYYY-MM-DD.tar", "output/reminders/<invoice>.txt"]


def test_task_view_fills_pattern_folders_from_the_inputs(make_task: Any, suite_dir: Path) -> None:
    make_task(
        {
            "id": "remind",
            "instruction": "For each invoice in input/invoices.csv write output/reminders/<invoice>.txt "
            "and output/backup_YYYY-MM-DD.tar is the archive name.",
            "workspace": "workspace",
            "hidden": "hidden",
            "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
        },
        {
            "workspace/input/invoices.csv": "invoice,amount\nINV-7,10\nINV-9,20\n",
            "hidden/grade.py": "def grade(t, w):\n    return {'x': 0.0}\n",
        },
    )
    view = TaskView(load_task_dir(suite_dir / "remind", "demo")[0])
    assert view.output_dirs == ["output/reminders"]
    assert view.outputs == ["output/reminders/INV-7.txt", "output/reminders/INV-9.txt"]


CSV = "owner,task,due\nines,Book the room,2026-11-06\nkofi,Clean up,2026-11-09\n"
MD = "# Q3 review\n\n## Timeline\n\n- 09:14 Deploy by Ann\n- 10:02 [EMAIL] paged\n\n| a | b |\n|---|--:|\n| x | 41,500 |\n"


def test_shapes_keep_the_structure_and_drop_the_substance() -> None:
    keep = words_of('Write out/actions.csv with the header owner,task,due and out/report.md with "## Timeline" and {"counts": n}')
    assert no_rows("a.csv", CSV, keep) == "owner,task,due\n"
    assert hollow("a.csv", CSV, keep) == "owner,task,due\n,,\n,,\n"
    data = json.dumps({"counts": {"ines": 1}, "items": [1, 2], "note": "x"})
    assert json.loads(no_rows("a.json", data, keep) or "") == {"counts": {}}
    assert hollow("r.md", MD, keep) == "#\n\n## Timeline\n\n- \n- [EMAIL]\n\n| | |\n|---|--:|\n| | |\n"
    assert no_rows("r.md", MD, keep) == "## Timeline\n\n"
    assert hollow("x.py", "print(1)\n", keep) is None and fake("x.sql", "SELECT 1", Faker(keep)) is None

    invented = fake("r.md", MD, Faker(keep)) or ""
    times = re.findall(r"^- (\d\d):(\d\d)", invented, flags=re.M)
    assert len(times) == 2 and all(int(h) < 24 for h, _ in times)  # the right format...
    assert not {("09", "14"), ("10", "02")} & set(times)  # ...and other times
    assert "## Timeline" in invented and "[EMAIL]" in invented and "Ann" not in invented and "41,500" not in invented
    assert fake("a.csv", CSV, Faker(keep)).splitlines()[0] == "owner,task,due"  # type: ignore[union-attr]
    pool = input_pool("Ann and Bo met at 08:30 and 11:45; Cy joined 2026-01-02.")
    borrowed = fake("r.md", MD, Faker(keep, pool, tokens_of(MD))) or ""
    assert re.search(r"^- (08:30|11:45) ", borrowed, flags=re.M) and re.search(r"\b(Bo|Cy)\b", borrowed)
    assert fake("t.txt", "Timeline", Faker(keep)) is None  # nothing would change: no attempt


def test_sql_columns_and_number_sweep() -> None:
    text = (
        "1. q/top.sql: the top 3 customers, with columns customer_name, orders (number of such orders), "
        'revenue (rounded), ordered by revenue descending.\n2. q/monthly.sql: columns month ("YYYY-MM"), '
        "paid_orders, revenue, ordered by month."
    )
    assert sql_columns(text, "q/top.sql", ["q/top.sql", "q/monthly.sql"]) == ["customer_name", "orders", "revenue"]
    assert sql_columns(text, "q/monthly.sql", ["q/top.sql", "q/monthly.sql"]) == ["month", "paid_orders", "revenue"]
    sweep = [float(x) for x in number_sweep(560_000)]
    assert all(min(abs(v - target) for v in sweep) <= max(1.0, 0.011 * target) for target in (7, 471_250, 88_750))


REDACT = {
    "instruction": "Write a copy of each file in tickets/ to out/clean/<same file name> with every email "
    "address replaced by [EMAIL]; all other text stays as it is.",
    "workspace": "workspace",
    "hidden": "hidden",
    "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
    "solution": "solution/solve.sh",
}
REDACT_FILES = {
    "workspace/tickets/a.txt": "From: Ann <ann@x.example>\nPlease call back today.\n",
    "workspace/tickets/b.txt": "Hi, this is bob@y.example.\nThanks!\n",
    "solution/solve.sh": "mkdir -p out/clean\nfor f in tickets/*; do sed -E 's/[A-Za-z.]+@[a-z.]+[a-z]/[EMAIL]/g' "
    '"$f" > out/clean/$(basename $f); done\n',
}
REDACT_GRADE = (
    "import os\n"
    "WANT = {'a.txt': 'From: Ann <[EMAIL]>\\nPlease call back today.\\n', 'b.txt': 'Hi, this is [EMAIL].\\nThanks!\\n'}\n"
    "def grade(t, w):\n"
    "    texts = {}\n"
    "    for n in WANT:\n"
    "        p = os.path.join(w, 'out', 'clean', n)\n"
    "        texts[n] = open(p).read() if os.path.exists(p) else None\n"
    "    if any(v is None for v in texts.values()):\n"
    "        return {'redacted': 0.0, 'kept': 0.0}\n"
    "    gone = all('@' not in v and '[EMAIL]' in v for v in texts.values())\n"
    "    {check}\n"
    "    return {'redacted': float(gone), 'kept': float(texts == WANT)}\n"
)
REDACT_FLAWED = REDACT_GRADE.replace("{check}", "pass")
REDACT_FIXED = REDACT_GRADE.replace(
    "{check}", "gone = gone and all(ln in texts[n].splitlines() for n in WANT for ln in WANT[n].splitlines() if '[EMAIL]' in ln)"
)

REPORT = {
    "instruction": 'input/log.txt lists today\'s events. Write out/report.md with the sections "## Timeline" '
    '(one bullet per event, starting with its HH:MM time) and "## Owner" (who deployed).',
    "workspace": "workspace",
    "hidden": "hidden",
    "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
    "solution": "solution/solve.sh",
}
REPORT_FILES = {
    "workspace/input/log.txt": "08:55 Bo opened the change\n09:10 Cy approved it\n09:20 Ann deployed\n",
    "solution/solve.sh": "mkdir -p out\nprintf '## Timeline\\n\\n- 08:55 change opened\\n- 09:10 approved\\n"
    "- 09:20 deployed\\n\\n## Owner\\n\\nAnn deployed.\\n' > out/report.md\n",
}
REPORT_GRADE = (
    "import re\n"
    "def grade(t, w):\n"
    "    try:\n"
    "        text = open(w + '/out/report.md').read()\n"
    "    except OSError:\n"
    "        return {'timeline': 0.0, 'owner': 0.0}\n"
    "    timeline = text.split('## Timeline')[-1].split('## Owner')[0]\n"
    "    owner = text.split('## Owner')[-1].strip()\n"
    "    times = re.findall(r'^- (\\d\\d:\\d\\d)', timeline, re.M)\n"
    "{checks}"
    "    return {'timeline': float(ok_times), 'owner': float(ok_owner)}\n"
)
REPORT_FLAWED = REPORT_GRADE.replace(
    "{checks}",
    ("    ok_times = len(times) >= 3\n    names = re.findall(r'Ann|Bo|Cy', owner)\n    ok_owner = bool(names) and names[0] == 'Ann'\n"),
)
REPORT_FIXED = REPORT_GRADE.replace(
    "{checks}",
    (
        "    ok_times = sorted(times) == ['08:55', '09:10', '09:20']\n"
        "    first = re.split(r'(?<=[.!?])\\s', owner, maxsplit=1)[0]\n"
        "    ok_owner = set(re.findall(r'Ann|Bo|Cy', first)) == {'Ann'}\n"
    ),
)

SQL = {
    "instruction": "db/data.sql fills a SQLite table sales(region, amount). Write q/totals.sql, one SELECT with "
    "columns region, total (the sum of amount), ordered by region.",
    "workspace": "workspace",
    "hidden": "hidden",
    "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
    "solution": "solution/solve.sh",
}
SQL_FILES = {
    "workspace/db/data.sql": ("CREATE TABLE sales(region TEXT, amount INT);\nINSERT INTO sales VALUES ('n', 2), ('s', 3), ('n', 4);\n"),
    "solution/solve.sh": "mkdir -p q\necho 'SELECT region, SUM(amount) AS total FROM sales GROUP BY region "
    "ORDER BY region;' > q/totals.sql\n",
}
SQL_GRADE = (
    "import sqlite3\n"
    "def grade(t, w):\n"
    "    try:\n"
    "        db = sqlite3.connect(':memory:')\n"
    "        db.executescript(\"CREATE TABLE sales(region TEXT, amount INT); INSERT INTO sales VALUES ('n', 2), ('s', 3), ('n', 4);\")\n"
    "        cur = db.execute(open(w + '/q/totals.sql').read())\n"
    "        rows, cols = cur.fetchall(), [d[0] for d in cur.description]\n"
    "    except Exception:\n"
    "        return {'columns': 0.0, 'rows': 0.0}\n"
    "    right = rows == [('n', 6), ('s', 3)]\n"
    "    return {'columns': float(cols == ['region', 'total']{gate}), 'rows': float(right)}\n"
)

VERSION = {
    "instruction": "Bump the minor version in VERSION (releases are archived as release_YYYY-MM-DD.tar; do not create one).",
    "workspace": "workspace",
    "hidden": "hidden",
    "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
    "solution": "solution/solve.sh",
}
VERSION_FILES = {
    "workspace/VERSION": "1.2.3\n",
    "solution/solve.sh": "chmod u+w VERSION\necho 1.3.0 > VERSION\n",
    "hidden/grade.py": (
        "def grade(t, w):\n    v = open(w + '/VERSION').read().strip()\n"
        "    return {'changed': float(v != '1.2.3' and bool(v)), 'right': float(v == '1.3.0')}\n"
    ),
}
STRATEGIES = [Empty(), Placeholder(), Skeleton(), Hollow(), BlanketMask(), Hedge(), UnsupportedClaims()]


@pytest.mark.sandbox
async def test_new_strategies_lift_flawed_graders_and_not_fixed_ones(make_task: Any, suite_dir: Path) -> None:
    for name, spec, files, grade in (
        ("redact-flawed", REDACT, REDACT_FILES, REDACT_FLAWED),
        ("redact-fixed", REDACT, REDACT_FILES, REDACT_FIXED),
        ("report-flawed", REPORT, REPORT_FILES, REPORT_FLAWED),
        ("report-fixed", REPORT, REPORT_FILES, REPORT_FIXED),
        ("sql-flawed", SQL, SQL_FILES, SQL_GRADE.replace("{gate}", "")),
        ("sql-fixed", SQL, SQL_FILES, SQL_GRADE.replace("{gate}", " and right")),
    ):
        make_task({**spec, "id": name}, {**files, "hidden/grade.py": grade})
    (make_task({**VERSION, "id": "version"}, VERSION_FILES) / "workspace" / "VERSION").chmod(0o444)  # attempts write it
    results = {r.task_id.split("/")[1]: r for r in await check_suite(load_suite(suite_dir), "bwrap", concurrency=4, strategies=STRATEGIES)}
    assert all(r.solution_status == "pass" and r.noop_status == "pass" for r in results.values()), [
        (k, r.problems) for k, r in results.items()
    ]

    redact = results["redact-flawed"].attempts  # the outputs are in a folder the instruction names by a pattern
    assert redact["hollow:blank"] == 0.5 and redact["blanket-mask:every-line"] == 0.5
    report = results["report-flawed"].attempts
    assert report["unsupported-claims:invented"] == 0.5 and report["unsupported-claims:from-inputs"] == 0.5
    assert report["hedge:names-reversed"] == 0.5 and report["hedge:names"] == 0.0  # Ann is named last in the log
    assert results["sql-flawed"].attempts["hollow:no-rows"] == 0.5
    version = results["version"]  # an extension-less file the solution changes; the name pattern is not written
    assert version.exploit_status == "fail" and version.attempts["unsupported-claims:invented"] == 0.5
    for name in ("redact-flawed", "report-flawed", "sql-flawed"):
        assert results[name].exploit_status == "fail" and not results[name].ok
    for name in ("redact-fixed", "report-fixed", "sql-fixed"):
        fixed = results[name]
        assert fixed.ok and fixed.exploit_status == "pass" and fixed.exploit_score == 0.0, (name, fixed.attempts)
        assert len(fixed.attempts) >= 6
