"""What hostile bundles cost a real leaderboard server process: CPU seconds and peak extra RSS per upload.

    PYTHONPATH=. python3 bench/leaderboard_bombs.py [--repeat 2]

Starts `clawgym leaderboard serve` on a temporary SQLite database, posts each bomb (built in
memory by tests/leaderboard/bombs.py; the 8 GiB one is ~8 MB sent) and eight sparse bundles at
once, and prints the server's CPU time and peak RSS above its idle level (sampled every 5 ms).
Prints figures only; the default test tier asserts the issue's budget (2 s, 100 MB).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.leaderboard import bombs  # noqa: E402
from tests.leaderboard.conftest import post, post_many  # noqa: E402
from tests.leaderboard.test_bundle_limits import _measure, make_bundle_once, server_process_in  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, server_process_in(Path(d)) as (url, token, server):
        post(url, token, make_bundle_once())
        print(f"{'upload':32} {'sent':>10} {'run':>4} {'server CPU s':>13} {'peak extra RSS MB':>18}  status")
        for name, build in bombs.ALL.items():
            data = build()
            for run in range(args.repeat):
                cpu, rss, codes = _measure(server, lambda data=data: [post(url, token, data).status_code])
                print(f"{name:32} {len(data):>10} {run + 1:>4} {cpu:>13.3f} {rss:>18.1f}  {codes}")
        sparse = bombs.sparse_bundle()
        for run in range(args.repeat):
            cpu, rss, codes = _measure(server, lambda: post_many(url, token, sparse, 8))
            print(f"{'8 sparse bundles at once':32} {8 * len(sparse):>10} {run + 1:>4} {cpu:>13.3f} {rss:>18.1f}  {sorted(set(codes))}")


if __name__ == "__main__":
    main()
