"""Runs a task's script verifier (``reward.sh``) in the sealed grading sandbox (passed to ``python3 -I -c``).

stdin: JSON {"key" (hex), "argv", "cwd", "timeout"}; the script inherits the environment. The script's stdout is read from a
socket, not a pipe: a socket cannot be reopened through /proc/<pid>/fd, so code the script runs
cannot write into it unless the script hands it the descriptor itself. When the script exits,
anything still running is an error (a process outliving its grader could print after it) and is
killed. The verdict, signed with the key as in ``_grade_driver``, is one stdout line
``__CLAWGYM_GRADE__ <hmac> {"rc", "stdout", "stray"}``; the script's stderr passes through.
"""

import ctypes
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

MARK = "__CLAWGYM_GRADE__ "
CAP = 4_000_000


def _seal():
    try:
        if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")
    except (OSError, AttributeError) as exc:
        sys.stderr.write("clawgym: cannot make the grading process non-dumpable: %s\n" % exc)
        sys.exit(3)


def _ancestors():
    """This process and the ones above it (a docker exec wrapper, the sandbox's init)."""
    pid, seen = os.getpid(), {1}
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            with open("/proc/%d/stat" % pid) as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return seen


def _others():
    """Pids of processes this one may signal that are not its ancestors (left by the script)."""
    keep = _ancestors()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in keep:
            try:
                os.kill(int(name), 0)
                found.append(int(name))
            except OSError:
                pass
    return found


def main():
    _seal()
    req = json.loads(sys.stdin.read())
    key = bytes.fromhex(req.pop("key"))
    ours, theirs = socket.socketpair()
    chunks = []

    def read():
        size = 0
        while True:
            data = ours.recv(65536)
            if not data:
                return
            if size < CAP:
                chunks.append(data)
                size += len(data)

    proc = subprocess.Popen(req["argv"], stdin=subprocess.DEVNULL, stdout=theirs, cwd=req["cwd"])
    theirs.close()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=req["timeout"])
    except subprocess.TimeoutExpired:
        rc = None
        proc.kill()
        proc.wait()
    left = _others()
    stray = rc is not None and bool(left)
    for _ in range(50):  # kill what is left; dead ones vanish once init has reaped them
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
        left = _others()
    reader.join(2.0)
    out = b"".join(chunks).decode("utf-8", errors="replace")
    sys.stdout.write(out)
    body = json.dumps({"rc": rc, "stdout": out[-2000:], "stray": stray})
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    sys.stdout.write("\n" + MARK + mac + " " + body + "\n")
    sys.stdout.flush()


main()
