"""Runs a task's ``grade()`` inside the sandbox (python3 stdlib only; passed to ``python3 -c``).

stdin: JSON {"transcript", "workspace", "file" (path inside) or null, "source" or null}.
The last stdout line is ``__CLAWGYM_GRADE__ {"ok": true, "scores": {...}}`` or ``{"ok": false, "error": ...}``;
anything grade() prints comes before it.
"""

import json
import sys
import traceback
import types

MARK = "__CLAWGYM_GRADE__ "


def _finish(payload):
    sys.stdout.flush()
    sys.stdout.write("\n" + MARK + json.dumps(payload) + "\n")
    sys.stdout.flush()


def main():
    try:
        req = json.loads(sys.stdin.read())
        path = req.get("file")
        source = req.get("source")
        if source is None:
            with open(path, encoding="utf-8") as fh:
                source = fh.read()
        module = types.ModuleType("clawgym_grade")
        module.__file__ = path or "<grade>"
        sys.path.insert(0, path.rsplit("/", 1)[0] if path and "/" in path else ".")
        exec(compile(source, path or "<grade>", "exec"), module.__dict__)
        grade = getattr(module, "grade", None)
        if not callable(grade):
            _finish({"ok": False, "error": "the file defines no grade(transcript, workspace_path) function"})
            return
        result = grade(req["transcript"], req["workspace"])
    except BaseException:  # the grader's own failure is reported, never raised
        _finish({"ok": False, "error": traceback.format_exc(limit=5)[-4000:]})
        return
    if not isinstance(result, dict):
        _finish({"ok": False, "error": "grade() returned %s, not a dict of sub-scores" % type(result).__name__})
        return
    scores = {}
    for key, value in result.items():
        try:
            scores[str(key)] = float(value)
        except (TypeError, ValueError):
            _finish({"ok": False, "error": "sub-score %r is %r, not a number" % (key, value)})
            return
    _finish({"ok": True, "scores": scores})


main()
