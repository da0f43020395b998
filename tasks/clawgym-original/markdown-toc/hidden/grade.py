"""Grader for markdown-toc: exact TOC entries (GitHub anchors), placement, and the rest left unchanged."""
from pathlib import Path

TOC = [
    "- [Overview](#overview)",
    "- [Deploying](#deploying)",
    "  - [Pre-flight checks](#pre-flight-checks)",
    "  - [Rolling out](#rolling-out)",
    "- [Incidents & Escalation](#incidents--escalation)",
    '  - [Known failure: "gateway timeouts"](#known-failure-gateway-timeouts)',
    "- [FAQ](#faq)",
    "- [Contacts](#contacts)",
]
INTRO = "This runbook covers the day-to-day operation of the payments service."
ORIGINAL_TAIL_START = "## Overview"


def _trim(lines):
    lines = [ln.rstrip() for ln in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def grade(transcript, workspace_path):
    scores = {"toc_entries": 0.0, "anchors": 0.0, "placement": 0.0, "body_unchanged": 0.0}
    ws = Path(workspace_path)
    try:
        lines = (ws / "output" / "runbook.md").read_text(encoding="utf-8").splitlines()
    except Exception:
        return scores
    bullets = [ln.rstrip() for ln in lines if ln.lstrip().startswith("- [")]
    texts = lambda items: [b.split("](")[0].strip() for b in items]
    if texts(bullets) == texts(TOC):
        scores["toc_entries"] = 1.0
    if bullets == TOC:
        scores["anchors"] = 1.0
    try:
        i = lines.index("## Contents")
        before = [ln for ln in lines[:i] if ln.strip()]
        if before == ["# Payments Service Runbook", INTRO] and lines[i + 1].strip() == "" \
                and [ln.rstrip() for ln in lines[i + 2:i + 2 + len(TOC)]] == TOC:
            scores["placement"] = 1.0
    except Exception:
        pass
    try:
        original = (ws / "docs" / "runbook.md").read_text(encoding="utf-8").splitlines()
        tail = _trim(original[original.index(ORIGINAL_TAIL_START):])
        got = _trim(lines)
        if got[-len(tail):] == tail and bullets:
            scores["body_unchanged"] = 1.0
    except Exception:
        pass
    return scores
