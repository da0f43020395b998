"""verify() in real bwrap sandboxes: every verifier kind, failure modes, weights, hidden files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawgym_env.grading import make_transcript, verify
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.scripted import ScriptedBackend
from clawgym_env.sandbox import SandboxConfig, create_sandbox
from clawgym_env.task import TaskSpec, load_task_dir

pytestmark = pytest.mark.sandbox

GRADE = """
import json, os
def grade(transcript, workspace_path):
    out = os.path.join(workspace_path, "out.txt")
    have = os.path.exists(out)
    right = have and open(out).read().strip() == "hello"
    return {"exists": 1.0 if have else 0.0, "content": 1.0 if right else 0.0,
            "said_done": 1.0 if "done" in transcript["final_message"] else 0.0}
"""


def load(make_task: Any, verifiers: list[dict[str, Any]], files: dict[str, str], **over: Any) -> TaskSpec:
    spec = {
        "id": "t",
        "instruction": "Write hello to out.txt",
        "workspace": "workspace",
        "hidden": "hidden",
        "verifiers": verifiers,
        **over,
    }
    tdir = make_task(spec, {"workspace/in.txt": "input\n", **files})
    (task,) = load_task_dir(tdir, "demo")
    return task


async def run(task: TaskSpec, agent: list[str] | None = None, final: str = "", judge: Any = None) -> Any:
    async with create_sandbox("bwrap", SandboxConfig(workspace_src=task.workspace_dir, workspace_mount=task.workspace_mount)) as sb:
        if agent:
            res = await sb.exec(["bash", "-c", " && ".join(agent)], cwd=task.workspace_mount)
            assert res.return_code == 0, res.stderr
        return await verify(task, sb, make_transcript(task, final), judge=judge)


async def test_code_verifier_scores_mean_of_subscores(make_task: Any) -> None:
    task = load(make_task, [{"kind": "code", "file": "hidden/grade.py"}], {"hidden/grade.py": GRADE})
    done = await run(task, ["echo hello > out.txt"], final="all done")
    assert done.score == pytest.approx(1.0)
    assert done.subscores == {"code/exists": 1.0, "code/content": 1.0, "code/said_done": 1.0}
    partial = await run(task, ["echo bye > out.txt"])
    assert partial.score == pytest.approx(1 / 3) and partial.subscores["code/content"] == 0.0
    nothing = await run(task)
    assert nothing.score == 0.0 and not nothing.errors


async def test_hidden_files_appear_only_at_verification(make_task: Any) -> None:
    probe = "import os\ndef grade(t, w):\n    return {'seen': 1.0 if os.path.exists('/verifier/grade.py') else 0.0}\n"
    task = load(make_task, [{"kind": "code", "file": "hidden/grade.py"}], {"hidden/grade.py": probe})
    async with create_sandbox("bwrap", SandboxConfig(workspace_src=task.workspace_dir)) as sb:
        before = await sb.exec(["bash", "-c", "ls /verifier 2>&1; find / -name grade.py 2>/dev/null | head"], cwd="/workspace")
        assert "grade.py" not in before.stdout
        result = await verify(task, sb, make_transcript(task))
    assert result.subscores == {"code/seen": 1.0}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("def grade(t, w):\n    raise ValueError('boom')\n", "boom"),
        ("def grade(t, w):\n    return {'a': float('nan'), 'b': 1.0}\n", "not finite"),
        ("def grade(t, w):\n    return 0.9\n", "not a dict"),
        ("def grade(t, w):\n    return {}\n", "no sub-scores"),
        ("def grade(t, w):\n    return {'a': 'high'}\n", "not a number"),
        ("x = 1\n", "no grade"),
        ("import os\ndef grade(t, w):\n    print('noise')\n    os._exit(3)\n", "exited 3"),
        ("import time\ndef grade(t, w):\n    time.sleep(30)\n", "ran past"),
        ("def grade(t, w):\n  return {'x': 1\n", "SyntaxError"),
    ],
)
async def test_broken_code_verifiers_score_zero_with_reason(make_task: Any, body: str, error: str) -> None:
    task = load(make_task, [{"kind": "code", "file": "hidden/grade.py", "timeout_s": 2}], {"hidden/grade.py": body})
    result = await run(task)
    assert result.score == 0.0
    assert error in result.errors["code"], result.errors


async def test_code_verifier_outside_hidden_is_sent_by_stdin(make_task: Any) -> None:
    task = load(make_task, [{"kind": "code", "file": "graders/grade.py"}], {"graders/grade.py": GRADE, "hidden/x": ""})
    assert task.sandbox_path_of("graders/grade.py") is None
    result = await run(task, ["echo hello > out.txt"], final="done")
    assert result.score == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("script", "score", "error"),
    [
        ("echo 'log line'\necho 0.75\n", 0.75, None),
        ("echo 1.5\n", 0.0, "not a number in [0, 1]"),
        ("echo nan\n", 0.0, "not a number in [0, 1]"),
        ("echo hello\n", 0.0, "not a number"),
        ("echo 1.0\nexit 2\n", 0.0, "exited 2"),
        ("true\n", 0.0, "not a number"),
        ("sleep 30\n", 0.0, "ran past"),
    ],
)
async def test_script_verifier_last_line_rule(make_task: Any, script: str, score: float, error: str | None) -> None:
    task = load(make_task, [{"kind": "script", "file": "hidden/reward.sh", "timeout_s": 2}], {"hidden/reward.sh": script})
    result = await run(task)
    assert result.score == pytest.approx(score)
    assert (error is None and not result.errors) or (error is not None and error in result.errors["script"])


async def test_script_sees_workspace_and_reward_payload(make_task: Any) -> None:
    script = (
        'test "$PWD" = "$CLAWGYM_WORKSPACE" || exit 9\n'
        'grep -q "the final words" "$OPENCLAW_REWARD_PAYLOAD" && test -f "$CLAWGYM_HIDDEN/reward.sh" && echo 1 || echo 0\n'
    )
    task = load(make_task, [{"kind": "script", "file": "hidden/reward.sh"}], {"hidden/reward.sh": script})
    assert (await run(task, final="the final words")).score == 1.0
    assert (await run(task, final="other")).score == 0.0


async def test_answer_verifier_from_message_and_file(make_task: Any) -> None:
    v = [
        {"kind": "answer", "expected": "1.5 million", "name": "msg"},
        {"kind": "answer", "expected": "Paris", "source": "file:out/answer.txt", "name": "file", "tag": None},
    ]
    task = load(make_task, v, {"hidden/x": ""})
    good = await run(task, ["mkdir -p out", "echo '  paris. ' > out/answer.txt"], final="It is <answer>1,500,000</answer>")
    assert good.score == 1.0 and good.details["verifiers"]["msg"]["extracted"] == "1,500,000"
    bad = await run(task, final="about 1.5 million")  # no tag, no file
    assert bad.score == 0.0 and "no <answer>" in bad.errors["msg"] and "does not exist" in bad.errors["file"]


async def test_weights_are_normalised_and_subscores_prefixed(make_task: Any) -> None:
    v = [{"kind": "code", "file": "hidden/grade.py", "weight": 0.7}, {"kind": "answer", "expected": "yes", "weight": 0.3}]
    task = load(make_task, v, {"hidden/grade.py": GRADE})
    result = await run(task, ["echo hello > out.txt"], final="<answer>no</answer>")
    # code: exists 1, content 1, said_done 0 -> 2/3, answer 0
    assert result.score == pytest.approx(0.7 * 2 / 3)
    assert result.details["verifiers"]["code"]["weight"] == pytest.approx(0.7)
    assert set(result.subscores) == {"code/exists", "code/content", "code/said_done", "answer/match"}


def _judge(replies: dict[str, str], seen: list[CompletionRequest]) -> ScriptedBackend:
    def reply(request: CompletionRequest) -> str:
        seen.append(request)
        body = request.messages[-1]["content"]
        for key, text in replies.items():
            if key in body:
                return text
        raise RuntimeError("judge is down")

    return ScriptedBackend(reply)


async def test_rubric_uses_judge_keeps_reasoning_and_records_failures(make_task: Any) -> None:
    v = [
        {
            "kind": "rubric",
            "files": ["report.md", "out/*.txt"],
            "items": [
                {"criterion": "Names the top supplier", "weight": 2, "options": {"yes": 1.0, "partial": 0.5, "no": 0.0}},
                {"criterion": "Mentions the total", "weight": 1},
                {"criterion": "Unanswerable item", "weight": 1},
            ],
        }
    ]
    task = load(make_task, v, {"hidden/x": ""})
    seen: list[CompletionRequest] = []
    judge = _judge(
        {
            "top supplier": '{"reasoning": "Acme is named.", "verdict": "partial"}',
            "the total": 'ok {"reasoning": "Total 42 present.", "verdict": "yes"}',
        },
        seen,
    )
    result = await run(
        task, ["echo '# Acme report' > report.md", "mkdir -p out", "echo total 42 > out/a.txt"], final="see report", judge=judge
    )
    items = result.details["verifiers"]["rubric"]["items"]
    assert items["item1"] == {"score": 0.5, "verdict": "partial", "reasoning": "Acme is named."}
    assert items["item2"]["verdict"] == "yes" and items["item2"]["reasoning"] == "Total 42 present."
    assert items["item3"]["score"] == 0.0 and "judge is down" in items["item3"]["error"]
    assert result.score == pytest.approx((2 * 0.5 + 1 * 1.0 + 0) / 4)
    assert result.subscores == {"rubric/item1": 0.5, "rubric/item2": 1.0, "rubric/item3": 0.0}
    body = seen[0].messages[-1]["content"]
    assert "# Acme report" in body and "## File out/a.txt" in body and "total 42" in body
    assert all(r.prompt_ids is None and r.temperature == 0.0 for r in seen)


async def test_rubric_with_nothing_to_judge_scores_zero_without_a_judge(make_task: Any) -> None:
    v = [{"kind": "rubric", "files": ["report.md"], "items": [{"criterion": "Good report"}]}]
    task = load(make_task, v, {"hidden/x": ""})
    result = await run(task)
    assert result.score == 0.0 and not result.errors
    missing_judge = await run(task, ["echo hi > report.md"])
    assert missing_judge.score == 0.0 and "no judge" in missing_judge.errors["rubric"]


async def test_clawgym_reward_in_workspace_reward_folder(make_task: Any, sample_dir: Path, tmp_path: Path) -> None:
    from clawgym_env.authoring.importers import import_suite
    from clawgym_env.task.suite import load_suite

    report = import_suite("clawgym", sample_dir / "task_1452", "one", tmp_path / "out")
    (task,) = load_suite(report.path).tasks
    assert task.hidden_mount == "/root/.openclaw/workspace/reward"
    result = await run(task)
    assert round(result.score, 3) == 0.056 and result.subscores["reward/score"] == pytest.approx(1 / 18)


PLANT = [
    'printf \'def dumps(*a, **k):\\n    return "HACKED"\\ndef loads(*a, **k):\\n    return {"x": 1.0}\\n\' > json.py',
    "mkdir -p reward && cp json.py reward/json.py && cp json.py reward/math.py",
    "d=$(python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p $d && "
    "echo 'import builtins; builtins.HACKED = 1' > $d/usercustomize.py",
]


async def test_files_planted_by_the_agent_do_not_load_into_verifiers(make_task: Any) -> None:
    grade = "import json\ndef grade(t, w):\n    import builtins\n    return {'clean': 0.0 if hasattr(builtins, 'HACKED') else 0.5}\n"
    script = (
        "cd reward && python3 -c 'import json, builtins; "
        'print(0.25 if json.dumps(1) == "1" and not hasattr(builtins, "HACKED") else 1.0)\'\n'
    )
    task = load(
        make_task,
        [{"kind": "code", "file": "hidden/grade.py"}, {"kind": "script", "file": "hidden/reward.sh"}],
        {"hidden/grade.py": grade, "hidden/reward.sh": script},
        hidden_mount="reward",
    )
    assert task.hidden_mount == "/workspace/reward"
    result = await run(task, PLANT)
    assert result.subscores == {"code/clean": 0.5, "script/score": 0.25}, result.output


def test_hidden_mount_may_not_hold_the_workspace(make_task: Any) -> None:
    from clawgym_env.errors import TaskSpecError

    for mount in (".", "/", "/work"):
        spec = {
            "id": "t",
            "instruction": "x",
            "workspace_mount": "/work/space",
            "hidden": "hidden",
            "hidden_mount": mount,
            "verifiers": [{"kind": "answer", "expected": "1"}],
        }
        tdir = make_task(spec, {"hidden/x": ""})
        with pytest.raises(TaskSpecError, match="hidden_mount.*holds the workspace"):
            load_task_dir(tdir, "demo")
