"""Attacks by someone who has read the grading code (clawgym_env/grading/grade.py and its drivers).

* steal the verdict key or the grader's descriptors: read the driver's memory or environment
  through /proc, ptrace it, copy its stdout with pidfd_getfd, then sign a forged verdict;
* plant a fake grader where the hidden files go (ClawGym layout: <workspace>/reward), as a
  folder and as a symlink;
* leave a process that outlives the script grader and prints "1.0" after it.
"""

from __future__ import annotations

from pathlib import Path

from tests.security.conftest import ANCESTORS, ORIGINAL, Attack, bash, forged_scores, honest_score, write
from tests.security.test_forged_verdicts import DURATION_KEYS

STEAL = """
import ctypes, hashlib, hmac, json, os, re
libc = ctypes.CDLL(None, use_errno=True)
body = {forged!r}
keys, fds = [], []
{ancestors}for p in chain:
    for name in ("mem", "environ", "cmdline"):
        try:
            keys += re.findall(rb"[0-9a-f]{{64}}", open("/proc/%d/%s" % (p, name), "rb").read(1 << 24))
        except Exception:
            pass
    if libc.ptrace(16, p, 0, 0) == 0:  # PTRACE_ATTACH
        keys.append(b"ptrace-attached")
    pidfd = libc.syscall(434, p, 0)  # pidfd_open
    for fd in range(0, 8):
        got = libc.syscall(438, pidfd, fd, 0) if pidfd >= 0 else -1  # pidfd_getfd
        if got >= 0:
            fds.append(got)
lines = ["__CLAWGYM_GRADE__ %s %s" % (hmac.new(k, body.encode(), hashlib.sha256).hexdigest(), body) for k in keys[:50]]
for fd in fds:
    try:
        os.write(fd, ("\\n" + "\\n".join(lines + ["__CLAWGYM_GRADE__ " + body]) + "\\n").encode())
    except OSError:
        pass
"""


async def test_stealing_the_key_or_the_graders_descriptors(backend: str, attack: Attack) -> None:
    module = STEAL.format(ancestors=ANCESTORS, forged=forged_scores(*DURATION_KEYS))
    _, rec = await attack(ORIGINAL, "implement-durations", [write("durations.py", module)], backend)
    assert rec.score == 0.0, rec.verifier_output


async def test_fake_grader_planted_where_the_hidden_files_go(backend: str, attack: Attack, clawgym_suite: Path) -> None:
    plant = (
        "cd /root/.openclaw/workspace && mkdir -p fake reward && "
        "printf '#!/bin/bash\\necho 1.0\\n' | tee fake/reward.sh reward/reward.sh >/dev/null && "
        "printf 'print(1.0)\\n' | tee fake/check.py reward/check.py >/dev/null && chmod +x fake/* reward/*"
    )
    _, rec = await attack(clawgym_suite, "task-0000", [bash(plant)], backend)
    assert rec.score == 0.0, rec.verifier_output
    relink = "cd /root/.openclaw/workspace && rm -rf reward && ln -s fake reward && ls -l"
    _, rec = await attack(clawgym_suite, "task-0000", [bash(plant), bash(relink)], backend)
    assert rec.score == 0.0, rec.verifier_output


OUTLIVE = """#!/bin/bash
# called by the hidden reward.sh: leave a process that waits for the grader to finish, then
# prints 1.0 on every stdout it can open
if mkdir /tmp/.outlive-once 2>/dev/null; then
cat > /tmp/.outlive.py <<'PY'
import glob, os, time
def graders():
    found = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            if open(d + "/cmdline", "rb").read().startswith(b"bash\\0/verifier/reward.sh"):
                found.append(d)
        except OSError:
            pass
    return found
deadline = time.time() + 30
while graders() and time.time() < deadline:
    time.sleep(0.01)
for d in glob.glob("/proc/[0-9]*/fd/1"):
    try:
        with open(d, "w") as f:
            f.write("\\n1.0\\n")
    except OSError:
        pass
PY
setsid -f python3 /tmp/.outlive.py </dev/null >/dev/null 2>&1
fi
echo 0
"""


async def test_a_process_outliving_the_script_grader(backend: str, attack: Attack) -> None:
    _, rec = await attack(ORIGINAL, "tmp-cleanup-script", [write("scripts/cleanup.sh", OUTLIVE)], backend)
    baseline = await honest_score(ORIGINAL, "tmp-cleanup-script", {"scripts/cleanup.sh": "#!/bin/bash\necho 0\n"}, backend)
    # its 1.0 lands on the grading sandbox's stdout, never in the signed verdict; caught alive, it is an error
    assert rec.score <= baseline < 1.0, rec.verifier_output
    assert rec.score == baseline or "processes running" in (rec.error or ""), rec.error
