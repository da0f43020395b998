"""`clawgym trace show`: terminal tree and self-contained HTML from capture JSONL files."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from clawgym_env.cli.trace import app
from clawgym_env.tree import build_tree
from clawgym_env.tree.synthetic import EpisodeShape, synthetic_episode, synthetic_group

SHAPE = EpisodeShape(n_calls=5, system_tokens=80, retry_at=1, subagent_at=2, compaction_at=3)


def write(path: Path, calls) -> Path:
    path.write_text("".join(c.model_dump_json() + "\n" for c in calls))
    return path


def test_show_prints_branches_token_counts_and_latency(tmp_path: Path) -> None:
    calls = synthetic_episode("openclaw", shape=SHAPE)
    cap = write(tmp_path / "ep.jsonl", calls)
    res = CliRunner().invoke(app, ["show", str(cap)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    tree = build_tree(calls)
    assert f"naive_tokens      {tree.naive_tokens}" in res.output or str(tree.naive_tokens) in res.output
    assert res.output.count("branch x") == len([n for n in tree.nodes() if len(n.children) > 1])
    for c in calls:
        assert f"call ep0#{c.call_index} " in res.output
    assert f"{calls[0].latency_s * 1000:.0f} ms" in res.output
    assert "subagent" in res.output and "compaction" in res.output and "dead" in res.output
    assert re.search(r"\d+ sampled", res.output)


def test_show_writes_self_contained_html_for_a_group(tmp_path: Path) -> None:
    group = synthetic_group("claude-code", 2, SHAPE)
    caps = [write(tmp_path / f"r{i}.jsonl", ep) for i, ep in enumerate(group)]
    out = tmp_path / "view" / "trace.html"
    res = CliRunner().invoke(app, ["show", *map(str, caps), "--html", str(out), "--drop-dead", "--exclude", "subagent"])
    assert res.exit_code == 0, res.output
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "<script" not in page and "http" not in page
    tree = build_tree([c for ep in group for c in ep])
    kept = [i for i in tree.calls.values() if not i.dead and i.kind != "subagent"]
    assert page.count('<div class="call">') == len(kept)
    assert page.count("<details") > 1 and "rollout1" in page


def test_show_reports_bad_input_as_an_error(tmp_path: Path) -> None:
    cap = write(tmp_path / "ep.jsonl", synthetic_episode("claude-code", shape=SHAPE))
    res = CliRunner().invoke(app, ["show", str(cap), "--exclude", "tools"])
    assert res.exit_code == 2 and "exclude_kinds" in res.output


def test_show_explains_message_level_captures_and_a_bad_tokenizer(tmp_path: Path) -> None:
    from clawgym_env.capture.records import CallRecord

    cap = write(
        tmp_path / "scripted.jsonl",
        [
            CallRecord(
                session_id="s", call_index=0, dialect="openai-chat", completion_text="done", messages=[{"role": "user", "content": "go"}]
            )
        ],
    )
    res = CliRunner().invoke(app, ["show", str(cap)], env={"COLUMNS": "300"})
    assert res.exit_code == 0 and "1 call(s) carry no token ids" in res.output and "token-level backend" in res.output
    ok = write(tmp_path / "ep.jsonl", synthetic_episode("openclaw", shape=SHAPE))
    res = CliRunner().invoke(app, ["show", str(ok), "--tokenizer", str(tmp_path / "nope")], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "error: --tokenizer" in res.output and "Traceback" not in res.output
