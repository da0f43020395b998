"""OfficeQA answer scoring: our rule beside the official scorer on the same answers, in one run.

    python bench/officeqa_scoring.py [--official /path/to/officeqa/reward.py] [--rounds 2]

Prints, per round: the conformance table's rows per second through ``officeqa_verdict``; and for the
answers the official scorer finds hardest (a 12-item list written without spaces, which it splits
every possible way) the seconds each call takes with ours and, given ``--official``, with the
official ``score_answer`` (its code stays where it is: the path is only imported). Also a 10 MB
reply. The verdicts of both are printed beside the times; they must agree.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import importlib.util
import io
import time
from collections.abc import Callable
from pathlib import Path

from clawgym_env.grading.officeqa_scoring import officeqa_verdict

TABLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "officeqa" / "conformance.csv.gz"
TWELVE = "[374,443, 381,327, 401,845, 433,432, 461,855, 478,957, 505,483, 595,307, 664,852, 731,821, 798,733, 854,741]"
HARD = [
    ("12-item list, no spaces", TWELVE, "[" + TWELVE[1:-1].replace(", ", ",") + "]"),
    ("12-item list, no spaces, last item off", TWELVE, "[" + TWELVE[1:-1].replace(", ", ",").replace("854,741", "854,742") + "]"),
    ("12 items, commas only", TWELVE, TWELVE[1:-1].replace(", ", ",")),
    ("10 MB reply, answer at the end", "2,602", "x" * 10_000_000 + "<FINAL_ANSWER>2,602</FINAL_ANSWER>"),
]


def _official(path: Path) -> Callable[[str, str, float], float]:
    spec = importlib.util.spec_from_file_location("officeqa_reward", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.score_answer


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--official", type=Path, help="the official reward.py (databricks/officeqa)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    official = _official(args.official) if args.official else None
    rows = list(csv.DictReader(io.StringIO(gzip.decompress(TABLE.read_bytes()).decode("utf-8"), newline="")))
    for r in range(1, args.rounds + 1):
        took, _ = _timed(lambda: [officeqa_verdict(x["ground_truth"], x["candidate"], float(x["tolerance"])) for x in rows])
        print(f"round {r}: conformance table, {len(rows):,} rows: ours {took:.2f} s ({len(rows) / took:,.0f} rows/s)")
        for label, reference, answer in HARD:
            ours_s, ours = _timed(lambda: officeqa_verdict(reference, answer, 0.0)[0])  # noqa: B023 - called at once
            line = f"  {label}: ours {ours_s * 1000:.1f} ms -> {int(bool(ours))}"
            if official is not None:
                off_s, off = _timed(lambda: official(reference, answer, 0.0))  # noqa: B023 - called at once
                line += f" | official {off_s:.2f} s -> {int(off)}"  # type: ignore[call-overload]
            print(line, flush=True)


if __name__ == "__main__":
    main()
