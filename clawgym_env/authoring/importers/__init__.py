"""Importers: third-party task formats -> a ClawGym suite folder, written atomically.

``import_suite("clawgym", path, "clawgym-sample")`` writes ``<suites dir>/clawgym-sample`` (or
``out``) via a temporary folder and a rename, after every generated task has validated.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawgym_env.authoring.importers._write import ImportReport, dump_yaml, slug_id, staged_suite
from clawgym_env.errors import ConfigError, ImportInvalidError, TaskSpecError
from clawgym_env.task.loader import load_task_dir
from clawgym_env.task.spec import SUITE_PATTERN

__all__ = ["FORMATS", "ImportReport", "import_suite"]

FORMATS: dict[str, str] = {
    "clawgym": "ClawGym task folders (data_entry.json, input_files/, reward/)",
    "clawgym-hf": "ClawGym Hugging Face JSONL (prompt, hook_code, input_files, rule)",
    "jobbench": "JobBench dataset/ and dataset_easy/ (or main/ and easy/) <occupation>/taskN/ folders (RUBRICS.json, task_folder/)",
    "officeqa": "OfficeQA CSV (uid, question, answer, source_docs, source_files, difficulty)",
}

_DESCRIPTIONS = {
    "clawgym": "Imported from ClawGym task folders; graded by each task's own reward.sh.",
    "clawgym-hf": "Imported from the ClawGym Hugging Face JSONL; graded by each task's own hook.",
    "jobbench": "Imported from JobBench; the files in output/ graded by an LLM judge against the task rubrics, "
    "the official way (binary rubrics, reward = passed weight / total weight).",
    "officeqa": "Imported from OfficeQA; answers grounded in documents, scored by OfficeQA's official rule.",
}


def _importer(fmt: str) -> Callable[..., None]:
    if fmt == "clawgym":
        from clawgym_env.authoring.importers.clawgym import import_clawgym as fn
    elif fmt == "clawgym-hf":
        from clawgym_env.authoring.importers.clawgym_hf import import_clawgym_hf as fn
    elif fmt == "jobbench":
        from clawgym_env.authoring.importers.jobbench import import_jobbench as fn
    elif fmt == "officeqa":
        from clawgym_env.authoring.importers.officeqa import import_officeqa as fn
    else:
        raise ConfigError(f"unknown import format {fmt!r}. Fix: use one of {', '.join(FORMATS)}.")
    return fn


def _refuse_invalid(source: Path, report: ImportReport) -> None:
    if not report.skipped:
        return
    lines = "\n".join(f"  {line}" for line in report.skipped[:50])
    more = f"\n  ... and {len(report.skipped) - 50} more" if len(report.skipped) > 50 else ""
    raise ImportInvalidError(
        f"{source}: {len(report.skipped)} invalid task(s), nothing imported:\n{lines}{more}\n"
        "Fix: repair them, or pass --skip-invalid to import the others and leave these out."
    )


def import_suite(
    fmt: str,
    src: str | Path,
    suite: str,
    out: str | Path | None = None,
    *,
    force: bool = False,
    pass_threshold: float | None = None,
    skip_invalid: bool = False,
    **options: Any,
) -> ImportReport:
    """Convert ``src`` (format ``fmt``) into the suite ``suite``; returns what was written and skipped.

    ``out`` defaults to ``<user suites dir>/<suite>``. Every task is validated before the
    suite appears; nothing is left behind on failure. A source entry that is not a valid task is
    an error listing every such entry with its reason, unless ``skip_invalid`` (then they are
    left out and listed in ``report.skipped``).
    """
    import re

    from clawgym_env.task.suite import user_suites_dir

    fn = _importer(fmt)
    if not re.fullmatch(SUITE_PATTERN, suite):
        raise ConfigError(f"--suite {suite!r}: not a valid suite name. Fix: use lowercase letters, digits and '-' ({slug_id(suite)!r}).")
    source = Path(src).expanduser()
    if not source.exists():
        raise ConfigError(f"{source}: does not exist. Fix: give the path of the {FORMATS.get(fmt, fmt)}.")
    out_dir = Path(out).expanduser() if out else user_suites_dir() / suite
    if out_dir.name != suite:
        out_dir = out_dir / suite
    report = ImportReport(suite=suite, path=out_dir.absolute())
    with staged_suite(out_dir, force=force) as stage:
        fn(source, stage, report, **options)
        if not skip_invalid:
            _refuse_invalid(source, report)
        if report.tasks == 0:
            why = "; ".join(report.skipped[:5]) or "the source holds no tasks"
            raise ConfigError(f"{source}: nothing to import ({why}). Fix: check the format ({FORMATS[fmt]}).")
        threshold = pass_threshold if pass_threshold is not None else 1.0
        meta = {
            "name": suite,
            "description": _DESCRIPTIONS[fmt],
            "pass_threshold": threshold,
            "metadata": {"source_format": fmt, "source": str(source.absolute()), **report.metadata},
        }
        (stage / "suite.yaml").write_text(dump_yaml(meta), encoding="utf-8")
        for task_dir in sorted(p for p in stage.iterdir() if p.is_dir()):
            try:
                load_task_dir(task_dir, suite)
            except TaskSpecError as exc:
                origin = report.sources.get(task_dir.name)
                if origin is None:
                    raise TaskSpecError(f"import produced an invalid task {task_dir.name}: {exc}") from exc
                report.skipped.append(f"{origin}: {str(exc).replace(str(task_dir), str(origin))}")
                shutil.rmtree(task_dir)
                report.tasks -= 1
        if not skip_invalid:
            _refuse_invalid(source, report)
        if report.tasks == 0:
            raise ConfigError(f"{source}: nothing left to import. Fix: check the format ({FORMATS[fmt]}).")
    return report
