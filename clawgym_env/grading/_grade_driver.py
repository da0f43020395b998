"""Runs a task's ``grade()`` in the sealed grading sandbox (python3 stdlib only; passed to ``python3 -I -c``).

argv[1]: the source of ``_agent_jail``, loaded before stdin is read (it is the same for every episode, and
the process may be started while the agent still runs: nothing here touches the workspace before stdin).
stdin: JSON {"key" (hex), "transcript", "workspace", "file" (path inside) or null, "source" or null}.
The verdict is one stdout line ``__CLAWGYM_GRADE__ <hmac> {"ok": true, "scores": {...}}`` (or
``{"ok": false, "error": ...}``), signed with the key. Code under test (the agent's, run by grade()
as a child) shares this uid and may print anything, kill us or write to our stdout, but cannot
sign: the key came over stdin, already drained, and this process is made non-dumpable first, so
its memory and descriptors are closed to same-uid processes (the sandbox also refuses ptrace).
Importing the agent's modules into this process is refused: code in here could sign anything.
``grade()`` runs the agent's code through ``clawgym_grading`` (``_agent_jail``, argv[1]),
which keeps it away from the hidden files and from this process altogether.
"""

import ctypes
import hashlib
import hmac
import importlib.machinery
import json
import os
import pathlib  # noqa: F401  most graders use it: loaded before the request comes, off the episode's time
import sys
import types

MARK = "__CLAWGYM_GRADE__ "


def _seal():
    try:
        if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")
    except (OSError, AttributeError) as exc:  # never grade unsealed
        sys.stderr.write("clawgym: cannot make the grading process non-dumpable: %s\n" % exc)
        sys.exit(3)


class _NoWorkspaceImports:
    """A meta-path finder refusing modules found under the workspace (the agent's code)."""

    def __init__(self, workspace):
        self.root = workspace.rstrip("/") + "/"

    def find_spec(self, name, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        origin = (spec.origin or "") if spec is not None else ""
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if any(p.startswith(self.root) for p in [origin, *locations]):
            raise ImportError(
                "the grader imported %r from the workspace into the grading process; run the agent's code in a subprocess instead" % name
            )
        return None


def main():
    _seal()
    jail = types.ModuleType("clawgym_grading")
    exec(compile(sys.argv[1], "clawgym_grading", "exec"), jail.__dict__)  # noqa: S102 - the jail helper, our own code
    sys.modules["clawgym_grading"] = jail
    req = json.loads(sys.stdin.read())
    key = bytes.fromhex(req.pop("key"))

    def finish(payload):
        body = json.dumps(payload)
        mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
        sys.stdout.flush()
        sys.stdout.write("\n" + MARK + mac + " " + body + "\n")
        sys.stdout.flush()

    try:
        path = req.get("file")
        source = req.get("source")
        if source is None:
            with open(path, encoding="utf-8") as fh:
                source = fh.read()
        sys.meta_path.insert(0, _NoWorkspaceImports(req["workspace"]))
        module = types.ModuleType("clawgym_grade")
        module.__file__ = path or "<grade>"
        sys.path.insert(0, path.rsplit("/", 1)[0] if path and "/" in path else ".")
        exec(compile(source, path or "<grade>", "exec"), module.__dict__)  # noqa: S102 - the task's grader: why the driver exists
        grade = getattr(module, "grade", None)
        if not callable(grade):
            finish({"ok": False, "error": "the file defines no grade(transcript, workspace_path) function"})
            return
        result = grade(req["transcript"], req["workspace"])
    except BaseException:  # noqa: BLE001 - the grader's own failure is reported, never raised
        import traceback

        finish({"ok": False, "error": traceback.format_exc(limit=5)[-4000:]})
        return
    if not isinstance(result, dict):
        finish({"ok": False, "error": "grade() returned %s, not a dict of sub-scores" % type(result).__name__})
        return
    scores = {}
    for k, value in result.items():
        try:
            scores[str(k)] = float(value)
        except (TypeError, ValueError):
            finish({"ok": False, "error": "sub-score %r is %r, not a number" % (k, value)})
            return
    finish({"ok": True, "scores": scores})


main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)  # the verdict is out: skip the interpreter's teardown
