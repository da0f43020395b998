"""Runs a task's script verifier (``reward.sh``) in the sealed grading sandbox (passed to ``python3 -I -c``).

argv[1]: the source of ``_agent_jail``. stdin: JSON {"key" (hex), "argv", "cwd", "timeout"}; the script inherits the
environment. The script's stdout is read from a
socket, not a pipe: a socket cannot be reopened through /proc/<pid>/fd, so code the script runs
cannot write into it unless the script hands it the descriptor itself. When the script exits,
anything still running is an error (a process outliving its grader could print after it) and is
killed. The verdict, signed with the key as in ``_grade_driver``, is one stdout line
``__CLAWGYM_GRADE__ <hmac> {"rc", "stdout", "stray"}``; the script's stderr passes through.
The script runs the agent's code through ``$CLAWGYM_RUN_AGENT`` (``_agent_jail``'s command line,
its source passed as argv[1]), never directly. With "jail_python" (imported ClawGym checkers, which
run it as plain children), every python3 the script starts loads ``jail_subprocess`` first.
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
import tempfile
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


def _stat(pid):
    """(parent pid, start time in clock ticks) of ``pid``."""
    with open("/proc/%d/stat" % pid) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[19])


def _ancestors():
    """This process and the ones above it (a docker exec wrapper, the sandbox's init)."""
    pid, seen = os.getpid(), {1}
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            pid = _stat(pid)[0]
        except (OSError, ValueError, IndexError):
            break
    return seen


def _others(since):
    """Pids of processes this one may signal, started after it (so left by the script: never the
    sandbox's own init or sleep), that are not its ancestors."""
    keep = _ancestors()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in keep:
            try:
                if _stat(int(name))[1] < since:
                    continue
                os.kill(int(name), 0)
                found.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return found


def main():
    _seal()
    req = json.loads(sys.stdin.read())
    key = bytes.fromhex(req.pop("key"))
    jail_dir = tempfile.mkdtemp(prefix="clawgym-jail-")
    with open(os.path.join(jail_dir, "agent_jail.py"), "w") as fh:
        fh.write(sys.argv[1])
    os.environ["CLAWGYM_RUN_AGENT"] = "python3 -I " + os.path.join(jail_dir, "agent_jail.py")
    if req.pop("jail_python", False):  # checkers that run agent code as plain children: jail their subprocesses
        with open(os.path.join(jail_dir, "sitecustomize.py"), "w") as fh:
            fh.write("import agent_jail\nagent_jail.jail_subprocess([%r])\n" % req["cwd"])
        os.environ["PYTHONPATH"] = jail_dir
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

    proc = subprocess.Popen(req["argv"], stdin=subprocess.DEVNULL, stdout=theirs, cwd=req["cwd"])  # type: ignore[call-overload]  # a socket has fileno()
    theirs.close()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=req["timeout"])
    except subprocess.TimeoutExpired:
        rc = None
        proc.kill()
        proc.wait()
    since = _stat(os.getpid())[1]
    left = _others(since)
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
        left = _others(since)
    reader.join(2.0)
    out = b"".join(chunks).decode("utf-8", errors="replace")
    sys.stdout.write(out)
    body = json.dumps({"rc": rc, "stdout": out[-2000:], "stray": stray})
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    sys.stdout.write("\n" + MARK + mac + " " + body + "\n")
    sys.stdout.flush()


main()
sys.stderr.flush()
os._exit(0)  # the verdict is out: skip the interpreter's teardown
