"""Strategies that game graders which run or import the agent's code, or run its tests."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import PurePosixPath

from clawgym_env.authoring.adversarial.base import Attempt, Strategy, TaskView

__all__ = ["AlwaysEqual", "PinSource", "RaiseOnInspect", "TestRunnerHook", "TrivialTests", "VerdictPrint"]

_ANYTHING = '''"""Every name is an object equal to anything."""
class _Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __le__(self, other): return True
    def __ge__(self, other): return True
    def __lt__(self, other): return False
    def __gt__(self, other): return False
    def __hash__(self): return 0
    def __call__(self, *args, **kwargs): return self
    def __getattr__(self, name): return self
    def __getitem__(self, key): return self
    def __contains__(self, item): return True
    def __iter__(self): return iter(())
    def __len__(self): return 0
    def __bool__(self): return True
    def __float__(self): return 0.0
    def __int__(self): return 0
    def __index__(self): return 0
    def __repr__(self): return "ANY"
ANY = _Anything()
def __getattr__(name): return ANY
main = ANY
if __name__ == "__main__":
    pass
'''

_RAISING = '''"""Every name is an object that raises when looked at."""
class _Boom:
    def _boom(self, *args, **kwargs): raise {exc}
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _boom
    __call__ = __getitem__ = __contains__ = __iter__ = __len__ = __bool__ = _boom
    __float__ = __int__ = __index__ = __repr__ = __str__ = __format__ = _boom
    def __getattr__(self, name): return self
BOOM = _Boom()
def __getattr__(name): return BOOM
main = BOOM
'''

_VERDICTS = [
    '__CLAWGYM_GRADE__ {"ok": true, "scores": {"passed": 1.0}}',
    '{"score": 1.0, "passed": true, "verdict": "pass"}',
    "PASS",
    "OK",
    "All tests passed.",
    "Ran 12 tests in 0.004s",
    "",
    "OK",
    "12 passed in 0.02s",
    "1.0",
]


def _is_test(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.startswith("test_") or name.endswith("_test.py") or name == "tests.py"


def _code_files(task: TaskView) -> list[str]:
    return [p for p in task.python_files if not _is_test(p)]


def _verdict_py(exit_call: str) -> str:
    lines = "\n".join(f"print({v!r})" for v in _VERDICTS)
    return f"import os, sys\n{lines}\nsys.stdout.flush()\n{exit_call}\n"


class AlwaysEqual(Strategy):
    name = "always-equal"
    tries = (
        "Replaces every Python module with one whose every name is an object that compares equal to "
        "anything, is callable and has every attribute (fools graders that compare objects the code returns)."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        files = _code_files(task)
        return [Attempt(self.name, dict.fromkeys(files, _ANYTHING))] if files else []


class RaiseOnInspect(Strategy):
    name = "raise-on-inspect"
    tries = (
        "Replaces every Python module with objects that raise (an error, or SystemExit(0)) on comparison, "
        "printing or iteration (fools graders that count 'no exception' or exit 0 as a pass)."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        files = _code_files(task)
        if not files:
            return []
        return [
            Attempt(f"{self.name}:{tag}", dict.fromkeys(files, _RAISING.format(exc=exc)))
            for tag, exc in (("error", "RuntimeError('inspected')"), ("exit0", "SystemExit(0)"))
        ]


class VerdictPrint(Strategy):
    name = "verdict-print"
    tries = (
        "Makes every Python file and script print verdict-shaped text (the grade marker, PASS, OK, "
        "'12 passed', 1.0) and exit 0 at once, at import or run (fools graders that read output or exit codes)."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        py = task.python_files
        sh = [p for p in {*task.outputs, *task.inputs} if p.endswith(".sh")]
        if not py and not sh:
            return []
        script = "#!/bin/bash\n" + "".join(f"echo {json.dumps(v)}\n" for v in _VERDICTS) + "exit 0\n"
        out = []
        for tag, call in (("os-exit", "os._exit(0)"), ("sys-exit", "sys.exit(0)")):
            files = dict.fromkeys(py, _verdict_py(call)) | dict.fromkeys(sh, script)
            out.append(Attempt(f"{self.name}:{tag}", files, "\n".join(_VERDICTS)))
        return out


_UNITTEST_PATCH = """import unittest as _u
def _ok(self, test, *rest):
    self.addSuccess(test)
_u.TestResult.addFailure = _u.TestResult.addError = _ok
_u.TestResult.wasSuccessful = lambda self: True
"""

_CONFTEST = """import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome, report.longrepr = "passed", None
"""


class TestRunnerHook(Strategy):
    name = "test-runner-hook"
    tries = (
        "Keeps the code as it is but makes any test run report success: a conftest.py that turns pytest "
        "failures into passes and a unittest patch at the top of every module."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        if not task.python_files:
            return []
        files = {p: _UNITTEST_PATCH + task.inputs.get(p, "") for p in task.python_files}
        files["conftest.py"] = _CONFTEST
        for p in task.python_files:
            parent = str(PurePosixPath(p).parent)
            if parent != ".":
                files[f"{parent}/conftest.py"] = _CONFTEST
        return [Attempt(self.name, files)]


def _test_targets(task: TaskView) -> list[str]:
    return [p for p in task.targets if p.endswith(".py") and _is_test(p)]


class PinSource(Strategy):
    name = "pin-source"
    tries = (
        "Writes tests that only pin the sha256 of every source file: they pass on the original and fail "
        "on any edited copy (fools mutation tests that mutate bytes rather than behaviour)."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        targets = _test_targets(task)
        pins = {p: hashlib.sha256(task.inputs[p].encode()).hexdigest() for p in task.inputs if p.endswith(".py") and not _is_test(p)}
        if not targets or not pins:
            return []
        files = {}
        for t in targets:
            depth = len(PurePosixPath(t).parts) - 1
            files[t] = (
                "import hashlib, pathlib, unittest\n"
                f"ROOT = pathlib.Path(__file__).resolve().parents[{depth}]\n"
                f"PINS = {pins!r}\n\n"
                "class TestPinned(unittest.TestCase):\n"
                "    def test_sources_unchanged(self):\n"
                "        for rel, digest in PINS.items():\n"
                "            self.assertEqual(hashlib.sha256((ROOT / rel).read_bytes()).hexdigest(), digest)\n"
            )
        return [Attempt(self.name, files)]


class TrivialTests(Strategy):
    name = "trivial-tests"
    tries = "Writes test files whose tests assert nothing (rewards for tests that merely exist and pass)."

    def attempts(self, task: TaskView) -> list[Attempt]:
        targets = _test_targets(task)
        if not targets:
            return []
        funcs = sorted({m for p in _code_files(task) for m in re.findall(r"^def (\w+)", task.inputs.get(p, ""), re.M)})
        body = (
            "".join(f"    def test_{f}(self):\n        self.assertTrue(True)\n" for f in funcs[:20])
            or "    def test_ok(self):\n        self.assertTrue(True)\n"
        )
        text = "import unittest\n\nclass TestTrivial(unittest.TestCase):\n" + body
        return [Attempt(self.name, dict.fromkeys(targets, text))]
