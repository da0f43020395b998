"""Grader for write-unit-tests: the agent's tests must pass on slugify and on a rewrite of it that behaves
the same (different bytes, same behaviour), and fail on each variant with one rule broken. Tests that pin
the source (its hash, its text) instead of checking behaviour fail the rewrite and score nothing.
The tests run in the grading jail (``clawgym_grading``), over a scratch copy they cannot change."""
import shutil
import tempfile
from pathlib import Path

from clawgym_grading import run_agent

ORIGINAL = '"""URL slugs for article titles."""\n\nimport re\nimport unicodedata\n\n\ndef slugify(text, max_len=None, sep="-"):\n    """Turn ``text`` into a URL slug.\n\n    - accents are removed ("Crème" -> "creme") and other non-ASCII characters dropped\n    - the result is lowercase\n    - every run of characters other than a-z and 0-9 becomes a single ``sep``\n    - there is never a leading or trailing ``sep``\n    - with ``max_len``, the slug is cut to at most ``max_len`` characters at a word boundary;\n      only when the first word alone is longer than ``max_len`` is it cut mid-word\n    """\n    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")\n    words = re.split(r"[^a-z0-9]+", ascii_text.lower())\n    slug = sep.join(w for w in words if w)\n    if max_len is not None and len(slug) > max_len:\n        cut = slug[: max_len + 1]\n        if sep in cut:\n            slug = cut[: cut.rindex(sep)]\n        else:\n            slug = slug[:max_len]\n    return slug\n'

EQUIVALENT = ORIGINAL[: ORIGINAL.index('    ascii_text = ')] + '''    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if ord(ch) < 128).lower()
    parts = [p for p in re.split("[^a-z0-9]+", plain) if p]
    slug = sep.join(parts)
    if max_len is None or len(slug) <= max_len:
        return slug
    head = slug[: max_len + 1]
    return head[: head.rindex(sep)] if sep in head else slug[:max_len]
'''

MUTANTS = {
    "kills_accent_bug": ('unicodedata.normalize("NFKD", text)', "text"),
    "kills_lowercase_bug": ("ascii_text.lower()", "ascii_text"),
    "kills_edge_separator_bug": ("sep.join(w for w in words if w)", "sep.join(words)"),
    "kills_custom_sep_bug": ("sep.join(w for w in words if w)", '"-".join(w for w in words if w)'),
    "kills_max_len_bug": ("if sep in cut:", "if False:"),
}


def _passes(ws, source):
    """Run the agent's tests in a scratch copy with ``source`` as textkit/slug.py; True iff they pass."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        shutil.copytree(ws, root, ignore=shutil.ignore_patterns("__pycache__"))
        (root / "textkit" / "slug.py").write_text(source, encoding="utf-8")
        r = run_agent(["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."], root, timeout=60)
        ran = "Ran 0 tests" not in r.stderr and "Ran " in r.stderr
        return r.returncode == 0 and ran


def grade(transcript, workspace_path):
    ws = Path(workspace_path)
    scores = {"tests_pass_on_original": 0.0}
    scores.update({name: 0.0 for name in MUTANTS})
    try:
        if not (ws / "tests" / "test_slug.py").is_file() or not _passes(ws, ORIGINAL) or not _passes(ws, EQUIVALENT):
            return scores
        for name, (old, new) in MUTANTS.items():
            assert old in ORIGINAL
            try:
                scores[name] = 0.0 if _passes(ws, ORIGINAL.replace(old, new)) else 1.0
            except Exception:
                scores[name] = 1.0  # a hanging or crashing test run fails the mutant too
        # passing is worth something only for tests that check something: at least one broken rule caught
        scores["tests_pass_on_original"] = 1.0 if any(scores[n] for n in MUTANTS) else 0.0
    except Exception:
        pass
    return scores
