"""Runs the agent's code for a grader, out of the grader's reach (python3 stdlib only).

Shipped into the grading sandbox by the drivers: ``grade()`` imports it as ``clawgym_grading``;
script verifiers call it as ``$CLAWGYM_RUN_AGENT [--cwd D] [--timeout S] [--writable P] -- CMD...``.

A grader never runs the agent's code in its own process, nor as a plain child of it: code under
test shares nothing with the grader but what the grader hands it. ``run_agent`` starts it in a
jail where it cannot read the hidden grader files or the reward payload, cannot see, signal or
open the grader's processes and descriptors, and cannot write anything but the folders the grader
names in ``writable``; every process it leaves is killed when it returns. ``agent_values`` runs a
probe that imports the agent's code and hands back what it printed as data: the expected values
and the pass/fail comparison stay in ``grade()``, which no agent code can reach.

The jail comes from ``CLAWGYM_JAIL`` (JSON, set by the sealed sandbox):

* ``{"kind": "bwrap", "argv": [BWRAP, ...], "hide": [...]}``: a nested bubblewrap with new user, pid,
  mount, net, ipc and uts namespaces, no capabilities, no further user namespaces; the grading
  filesystem read-only; empty tmpfs over ``hide`` (hidden files, payload), /tmp and HOME. Its
  /proc is the grading sandbox's (a fresh one cannot be mounted under bwrap's): it lists the
  grader's processes but, from another user namespace, cannot open their fds, memory, environment,
  cwd or root (the kernel's ptrace check), nor signal them (another pid namespace).
* ``{"kind": "uid", "uid": 1000, "hide": [...]}``: docker. The grader is root; the code runs as
  ``uid`` with no capabilities (the hidden files and payload are root's, mode 0700); ``cwd`` is
  opened to it read-only, ``writable`` folders handed to it; afterwards every process of that
  uid is killed.
* ``{"kind": "unavailable", "why": ...}``: the host cannot nest bwrap; ``run_agent`` raises.
* absent: no jail (the ``none`` backend, which isolates nothing at all).
"""

import json
import os
import signal
import sys

__all__ = ["VALUES_MARK", "AgentRun", "agent_values", "jail_subprocess", "run_agent"]

VALUES_MARK = "CLAWGYM_VALUES "
"""``agent_values``: the probe's last stdout line starting with this holds its values (JSON)."""
_PRELUDE = (
    "import json as _cgj, sys as _cgs\n"
    "def emit(value):\n"
    "    _cgs.stdout.write('\\n%s' + _cgj.dumps(value) + '\\n'); _cgs.stdout.flush()\n" % VALUES_MARK
)
_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "TERM")
_REAL_POPEN: list[type] = []
"""The real ``subprocess.Popen``, for the jail itself (``jail_subprocess`` replaces it)."""


def _subprocess():
    """``subprocess``, imported when agent code first runs (most graders never run any: its import is ~3 ms of
    every episode's grading CPU), its real Popen kept first."""
    import subprocess

    if not _REAL_POPEN:
        _REAL_POPEN.append(subprocess.Popen)
    return subprocess


class AgentRun:
    """What a jailed run left: exit status (None when it ran past its timeout) and output."""

    def __init__(self, returncode, stdout, stderr, timed_out):
        self.returncode, self.stdout, self.stderr, self.timed_out = returncode, stdout, stderr, timed_out

    def __repr__(self):
        return "AgentRun(returncode=%r, timed_out=%r, stdout=%r)" % (self.returncode, self.timed_out, self.stdout[-200:])


def _jail():
    raw = os.environ.get("CLAWGYM_JAIL")
    return json.loads(raw) if raw else {"kind": "none", "hide": []}


def _env(home):
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update({"HOME": home, "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"})
    return env


def _under(path, roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _bwrap_argv(jail, cmd, cwd, writable):
    home = os.environ.get("HOME", "/root")
    # jail["argv"]: the bwrap binary, namespaces and privileges (sandbox._bwrap_host.jail_argv, probed there)
    a = [*jail["argv"], "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--tmpfs", home, "--dev", "/dev"]
    if _under(cwd, ["/tmp", home]) and not _under(cwd, writable):
        a += ["--ro-bind", cwd, cwd]
    for w in writable:
        a += ["--bind", w, w]
    for h in jail.get("hide", []):  # last: over any bind above that holds them
        a += ["--tmpfs", h]
    return [*a, "--chdir", cwd, "--", *cmd]


def _open_to(uid, cwd, writable, hide):
    """uid jail: let ``uid`` read ``cwd`` (and pass through its parents) and own ``writable``;
    never the ``hide`` paths (hidden files inside the workspace stay root's, 0700)."""

    def chmod_add(path, bits):
        try:
            st = os.lstat(path)
            if not os.path.islink(path) and st.st_mode & bits != bits:
                os.chmod(path, st.st_mode | bits)
        except OSError:  # a read-only mount, a file gone meanwhile
            pass

    p = cwd
    while p not in ("/", ""):
        chmod_add(p, 0o005)
        p = os.path.dirname(p)
    for root, dirs, files in os.walk(cwd):
        dirs[:] = [d for d in dirs if not _under(os.path.join(root, d), hide)]
        for d in dirs:
            chmod_add(os.path.join(root, d), 0o005)
        for f in files:
            full = os.path.join(root, f)
            chmod_add(full, 0o005 if os.lstat(full).st_mode & 0o100 else 0o004)
    for w in writable:
        for root, dirs, files in os.walk(w):
            dirs[:] = [d for d in dirs if not _under(os.path.join(root, d), hide)]
            for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                os.lchown(n, uid, uid)


def _as_uid(uid):
    def become():
        os.setsid()
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)  # from root: every capability goes with it

    return become


def _reap_uid(uid):
    """Kill every process of ``uid`` (a fork that becomes it, then kill(-1): only its own)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _jailed(cmd, cwd, writable):
    """(jail, argv, Popen options) that run ``cmd`` jailed in ``cwd``; raises where no jail can be made."""
    writable = [os.path.abspath(w) for w in writable]
    jail = _jail()
    kind = jail.get("kind")
    if kind == "unavailable":  # never run the agent's code unjailed: the grader fails, visibly
        raise RuntimeError("clawgym_grading: cannot run the agent's code safely: %s" % jail.get("why"))
    argv, preexec, home = list(cmd), None, os.environ.get("HOME", "/tmp")
    if kind == "bwrap":
        argv = _bwrap_argv(jail, argv, cwd, writable)
    elif kind == "uid":
        _open_to(int(jail["uid"]), cwd, writable, jail.get("hide", []))
        preexec, home = _as_uid(int(jail["uid"])), "/tmp"
    return jail, argv, {"env": _env(home), "preexec_fn": preexec, "start_new_session": preexec is None}


def run_agent(cmd, cwd, timeout=60, stdin=None, writable=()):
    """Run ``cmd`` (a list) as the agent's code in the jail, in ``cwd``; -> ``AgentRun``.

    ``cwd`` is visible read-only; ``writable`` lists folders the code may change (scratch copies).
    ``stdin``: text or None. Output is text (utf-8, errors replaced). Never raises for what the
    code does; a timeout kills it (and everything it started) and sets ``timed_out``.
    """
    cwd = os.path.abspath(cwd)
    jail, argv, opts = _jailed(cmd, cwd, writable)
    kind = jail.get("kind")
    subprocess = _subprocess()
    proc = _REAL_POPEN[0](argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **opts)
    try:
        out, err = proc.communicate(None if stdin is None else stdin.encode(), timeout=timeout)
        rc, timed_out = proc.returncode, False
    except subprocess.TimeoutExpired:
        if kind == "uid":  # root here has no CAP_KILL: only that uid can kill its processes
            _reap_uid(int(jail["uid"]))
        else:
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc, timed_out = None, True
    finally:
        if kind == "uid":
            _reap_uid(int(jail["uid"]))
    return AgentRun(rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out)


def agent_values(probe, *args, cwd, timeout=60):
    """Run ``probe`` (python source) with ``python3 -c`` in the jail and return what it passed to
    ``emit(value)`` (defined for it: prints ``VALUES_MARK`` + JSON), or None when it emitted
    nothing parseable. The values are data from the agent's code: compare them in ``grade()``."""
    run = run_agent(["python3", "-c", _PRELUDE + probe, *[str(a) for a in args]], cwd, timeout=timeout)
    for line in reversed(run.stdout.splitlines()):
        if line.startswith(VALUES_MARK):
            try:
                return json.loads(line[len(VALUES_MARK) :])
            except ValueError:
                return None
    return None


def jail_subprocess(writable=()):
    """Route every ``subprocess.Popen`` (so ``run``, ``call``, ``check_output``) of this interpreter
    through the jail: for checkers written to run the agent's code as plain children (imported
    ClawGym ``check.py``). Same args, cwd, stdin/stdout/stderr, text and timeout; the child gets the
    jail's clean environment (``env``, ``preexec_fn`` are dropped); it may write ``writable`` and this
    interpreter's temporary folder (``tempfile`` is pointed at a fresh one), nothing else."""
    import tempfile

    subprocess = _subprocess()
    tempfile.tempdir = tempfile.mkdtemp(prefix="clawgym-checker-")
    roots = [*writable, tempfile.tempdir]

    class JailedPopen(_REAL_POPEN[0]):  # type: ignore[misc, valid-type]  # the real Popen, captured at install
        def __init__(self, args, *pos, **kw):
            if pos:
                raise TypeError("clawgym_grading: pass Popen options by keyword")
            cmd = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
            cmd = [os.fsdecode(a) for a in cmd]
            if kw.pop("shell", False):
                cmd = ["/bin/sh", "-c", *cmd]
            if kw.pop("executable", None) is not None:
                raise TypeError("clawgym_grading: Popen(executable=...) is not supported in the jail")
            for k in ("env", "preexec_fn", "start_new_session", "process_group", "user", "group", "extra_groups"):
                kw.pop(k, None)
            cwd = os.path.abspath(os.fspath(kw.pop("cwd", None) or os.getcwd()))
            self._cg_jail, argv, opts = _jailed(cmd, cwd, roots)
            super().__init__(argv, cwd=cwd, **opts, **kw)

        def _cg_reap(self):
            if self._cg_jail.get("kind") == "uid":
                _reap_uid(int(self._cg_jail["uid"]))

        def wait(self, timeout=None):
            rc = super().wait(timeout)
            self._cg_reap()  # nothing the code started outlives it
            return rc

        def send_signal(self, sig):
            if self._cg_jail.get("kind") == "uid":  # root here has no CAP_KILL over that uid
                self._cg_reap()
            elif self.returncode is None:
                try:
                    os.killpg(self.pid, sig)
                except ProcessLookupError:
                    pass

        def kill(self):
            self.send_signal(signal.SIGKILL)

        def terminate(self):
            self.send_signal(signal.SIGTERM)

    subprocess.Popen = JailedPopen


def main(argv):
    """CLI for script verifiers: run CMD in the jail, pass its output through, exit with its status (124: timeout)."""
    import argparse

    p = argparse.ArgumentParser(prog="clawgym-run-agent", description=main.__doc__)
    p.add_argument("--cwd", default=os.getcwd())
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--writable", action="append", default=[])
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    ns = p.parse_args(argv)
    cmd = ns.cmd[1:] if ns.cmd[:1] == ["--"] else ns.cmd
    if not cmd:
        p.error("no command after --")
    run = run_agent(cmd, ns.cwd, timeout=ns.timeout, writable=ns.writable)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    sys.stdout.flush()
    return 124 if run.timed_out else (run.returncode if run.returncode >= 0 else 128 - run.returncode)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
