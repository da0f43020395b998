"""The attacks reported in issue 12, replayed as real episodes: none may change the verdict.

Each test plays an attacker through the custom harness with a scripted policy on a shipped
task; the task is never solved, so the honest score is the task's do-nothing floor (0 here).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.security.conftest import ANCESTORS, ORIGINAL, Attack, bash, digest, forged_scores, honest_score, write

DURATION_KEYS = ("single_units", "combined_units", "invalid_rejected", "format_duration")

# On import (the grader's probe imports it), walk up the process tree, write a forged verdict to
# every ancestor's stdout and stderr through /proc, then kill the grading process.
FORGE_ON_IMPORT = """
import json, os, signal
line = "\\n__CLAWGYM_GRADE__ " + {forged!r} + "\\n"
signed = "\\n__CLAWGYM_GRADE__ " + "0" * 64 + " " + {forged!r} + "\\n"
{ancestors}for p in chain:
    for fd in (1, 2):
        try:
            with open("/proc/%d/fd/%d" % (p, fd), "w") as f:
                f.write(signed + line)
        except Exception:
            pass
if chain:
    try:
        os.kill(chain[0], signal.SIGKILL)
    except Exception:
        pass
"""


async def test_forged_grade_line_from_the_agents_module(backend: str, attack: Attack) -> None:
    module = FORGE_ON_IMPORT.format(ancestors=ANCESTORS, forged=forged_scores(*DURATION_KEYS))
    _, rec = await attack(ORIGINAL, "implement-durations", [write("durations.py", module)], backend)
    assert rec.score == 0.0, rec.verifier_output
    assert rec.status in ("failed", "error")
    assert "exited" in (rec.error or "") or all(v == 0.0 for v in rec.subscores.values()), rec.error


async def test_symlink_at_the_payload_path_cannot_overwrite_the_grader(backend: str, attack: Attack, clawgym_suite: Path) -> None:
    hidden = clawgym_suite / "task-0000" / "hidden"
    before = digest(hidden)
    link = (
        "mkdir -p /tmp/.clawgym-verify && ln -sf /root/.openclaw/workspace/reward/reward.sh "
        "/tmp/.clawgym-verify/reward_payload.json && ls -l /tmp/.clawgym-verify"
    )
    # the payload (JSON, one line) would land in reward.sh through the link; bash expands $(...) in its
    # double-quoted strings: print 1.0 on the grader's stdout, then append `exit 0` for bash to read next
    final = "$(echo 1.0 >/proc/$$/fd/1; (echo; echo exit 0) >> /root/.openclaw/workspace/reward/reward.sh)"
    _, rec = await attack(clawgym_suite, "task-0000", [bash(link)], backend, final=final)
    assert rec.score == 0.0, rec.verifier_output
    assert digest(hidden) == before


REWRITE_GRADER = """#!/bin/bash
# called by the hidden reward.sh: rewrite it while it runs (bash reads its script as it goes)
g="${CLAWGYM_HIDDEN:-/verifier}/reward.sh"
for i in $(seq 200); do printf 'echo 1.0; exit 0\\n'; done > "$g" 2>/dev/null
printf '\\necho 1.0\\nexit 0\\n' >> "$g" 2>/dev/null
python3 - "$g" <<'PY' 2>/dev/null
import sys
with open(sys.argv[1], "r+") as f:
    f.seek(0); f.write("echo 1.0; exit 0\\n" * 300)
PY
echo 0
"""


async def test_rewriting_the_running_grader(backend: str, attack: Attack) -> None:
    hidden = ORIGINAL / "tmp-cleanup-script" / "hidden"
    before = digest(hidden)
    _, rec = await attack(ORIGINAL, "tmp-cleanup-script", [write("scripts/cleanup.sh", REWRITE_GRADER)], backend)
    # the script deletes nothing: it earns what a bare `echo 0` earns (some checks pass), never more
    baseline = await honest_score(ORIGINAL, "tmp-cleanup-script", {"scripts/cleanup.sh": "#!/bin/bash\necho 0\n"}, backend)
    assert rec.score == baseline < 1.0, rec.verifier_output
    assert digest(hidden) == before


DAEMON = """
import glob, json, os, sys, time
forged = "\\n__CLAWGYM_GRADE__ " + {forged!r} + "\\n"
deadline = time.time() + 600
while time.time() < deadline:
    for d in glob.glob("/proc/[0-9]*"):
        try:
            cmd = open(d + "/cmdline", "rb").read()
        except OSError:
            continue
        if b"__CLAWGYM_GRADE__" in cmd and str(os.getpid()) not in d:
            for g in glob.glob("/verifier/*"):
                open("/tmp/stolen-" + os.path.basename(g), "w").write(open(g).read())
            try:
                with open(d + "/fd/1", "w") as out:
                    out.write(forged)
                os.kill(int(d.rsplit("/", 1)[1]), 9)
            except Exception:
                pass
    time.sleep(0.02)
"""


async def test_a_process_that_survives_the_harness(backend: str, attack: Attack) -> None:
    from tests.clawgym_env.sandbox.conftest import processes_with

    marker = "clawgym-attack-daemon-7f3a"
    daemon = DAEMON.format(ancestors=ANCESTORS, forged=forged_scores(*DURATION_KEYS))
    start = (
        f"cp daemon.py /tmp/{marker}.py && rm daemon.py && "
        f"(env -i setsid python3 /tmp/{marker}.py </dev/null >/dev/null 2>&1 &) ; sleep 0.5; "
        f"pgrep -f {marker}.py >/dev/null && echo DAEMON-UP"
    )
    summary, rec = await attack(ORIGINAL, "implement-durations", [write("daemon.py", daemon), bash(start)], backend)
    assert rec.score == 0.0, rec.verifier_output
    assert processes_with(marker) == []  # nothing of the episode outlives it
    capture = json.loads((summary.out_dir / "captures").glob("*.jsonl").__next__().read_text().splitlines()[-1])
    assert "DAEMON-UP" in str(capture["messages"][-1].get("content"))  # it did run during the episode


NESTED = """
import json, os, urllib.request
body = b"[" * 100000 + b"]" * 100000
req = urllib.request.Request("http://127.0.0.1:8787/v1/chat/completions", data=body, method="POST",
                             headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                      "Content-Type": "application/json"})
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    print(opener.open(req, timeout=30).status)
except urllib.error.HTTPError as exc:
    print("status", exc.code, exc.read()[:200])
"""


async def test_deeply_nested_body_to_the_proxy(backend: str, attack: Attack) -> None:
    summary, rec = await attack(ORIGINAL, "smoke-hello-file-p0", [write("/tmp/nest.py", NESTED), bash("python3 /tmp/nest.py")], backend)
    assert summary.ran == 1 and rec.model_calls >= 2 and rec.score == 0.0
    capture = (summary.out_dir / "captures").glob("*.jsonl").__next__().read_text().splitlines()
    last_prompt = json.loads(capture[-1])["messages"][-1]
    assert "status 400" in str(last_prompt.get("content")) and "deeper than" in str(last_prompt.get("content"))
