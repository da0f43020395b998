"""The `clawgym leaderboard` commands end to end: admin, submit over HTTP, offline bundle, static export."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from clawgym_env.cli.main import app
from leaderboard.app import export_site
from tests.leaderboard.conftest import write_results

runner = CliRunner()


def test_submit_command_uploads_and_export_writes_a_static_site(server, tmp_path: Path) -> None:
    url, token, store = server
    results = write_results(tmp_path / "run")
    r = runner.invoke(app, ["leaderboard", "submit", str(results), "--server", url, "--token", token])
    assert r.exit_code == 0, r.output
    assert "accepted" in r.output and "Pass@1 50.0%" in r.output
    bad = runner.invoke(app, ["leaderboard", "submit", str(results), "--server", url, "--token", token])
    assert bad.exit_code == 1 and "already submitted" in bad.output
    # the file `submit --out` writes is accepted as it is
    other = write_results(tmp_path / "other", run_id="other", model="offline-model")
    bundle = tmp_path / "offline.tar.gz"
    assert runner.invoke(app, ["leaderboard", "submit", str(other), "--out", str(bundle)]).exit_code == 0
    r = runner.invoke(app, ["leaderboard", "submit", str(bundle), "--server", url, "--token", token])
    assert r.exit_code == 0 and "accepted" in r.output and "self-reported" in r.output, r.output
    files = export_site(store, tmp_path / "site")
    names = {f.name for f in files}
    assert {"index.html", "board-lb-suite.html"} <= names
    assert sum(n.startswith("trajectory-") for n in names) == 24
    assert any(n.startswith("board-lb-suite-") for n in names)
    board = (tmp_path / "site" / "board-lb-suite.html").read_text()
    assert "submission-" in board and "/submission/" not in board  # relative links only


def test_offline_bundle_and_admin_commands(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    out = tmp_path / "bundle.tar.gz"
    r = runner.invoke(app, ["leaderboard", "submit", str(write_results(tmp_path / "run")), "--out", str(out)])
    assert r.exit_code == 0 and out.stat().st_size > 0
    wrong = tmp_path / "notes.txt"
    wrong.write_text("not a bundle")
    r = runner.invoke(app, ["leaderboard", "submit", str(wrong), "--server", "http://127.0.0.1:9", "--token", "t"])
    assert r.exit_code == 2 and "notes.txt" in r.output and "gzipped tar" in r.output
    r = runner.invoke(app, ["leaderboard", "add-submitter", "carol", "--db", db])
    assert r.exit_code == 0 and r.output.strip().startswith("cgl_")
    r = runner.invoke(app, ["leaderboard", "export", "--db", db, "--out", str(tmp_path / "site")])
    assert r.exit_code == 0 and (tmp_path / "site" / "index.html").exists()
    missing = runner.invoke(app, ["leaderboard", "submit", str(tmp_path / "nothing"), "--out", str(out)])
    assert missing.exit_code == 2 and "error: " in missing.output and "manifest.json" in missing.output


def test_admin_mistakes_give_one_error_line(tmp_path: Path) -> None:
    import sqlite3

    old = tmp_path / "old.db"
    with sqlite3.connect(old) as conn:  # the submissions table as an earlier leaderboard made it
        conn.execute("CREATE TABLE submissions (id VARCHAR(40) PRIMARY KEY, suite VARCHAR(200), captures JSON)")
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert runner.invoke(app, ["leaderboard", "add-submitter", "dave", "--db", db]).exit_code == 0
    cases = {
        ("add-submitter", "dave", "--db", db): "submitter 'dave' already exists",
        ("add-submitter", "erin", "--db", "not-a-url"): "cannot open the leaderboard database 'not-a-url'",
        ("add-submitter", "fay", "--db", f"sqlite:///{old}"): "was made by an older version (table submissions lacks",
        ("add-suite", "clawgym-orignal", "--db", db): "Did you mean clawgym-original?",
        (
            "submit",
            str(write_results(tmp_path / "run")),
            "--server",
            "http://127.0.0.1:9",
            "--token",
            "t",
        ): "cannot reach the leaderboard at http://127.0.0.1:9",
    }
    for args, words in cases.items():
        r = runner.invoke(app, ["leaderboard", *args])
        assert r.exit_code == 2 and words in r.output and "Traceback" not in r.output, (args, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)


def test_trajectory_page_shows_tool_calls_with_dict_or_string_arguments() -> None:
    from clawgym_env.capture.records import CallRecord
    from leaderboard import views

    def call(arguments: object) -> CallRecord:
        return CallRecord(
            session_id="s",
            call_index=0,
            dialect="openai-chat",
            messages=[{"role": "user", "content": "go"}],
            response={
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "write", "arguments": arguments}}],
            },
        )

    class Sub:
        id, model = "x", "m"

    for arguments in ({"path": "a.txt"}, '{"path": "a.txt"}'):
        html = views.render("trajectory.html", static=True, sub=Sub(), session="s", calls=[call(arguments)])
        assert "write(" in html and "a.txt" in html
