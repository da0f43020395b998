"""Answer matching for ``kind: answer`` verifiers: pure functions, no I/O.

Numbers match within a relative tolerance after reading unit words (thousand, million,
billion, trillion and their short forms), thousands separators, currency signs, accounting
negatives and percent signs. Everything else matches after normalising case, whitespace and
punctuation.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata

__all__ = ["extract_tagged", "match_answer", "normalize_text", "numbers_in", "parse_number"]

_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "millions": 1e6,
    "mn": 1e6,
    "mm": 1e6,
    "m": 1e6,
    "billion": 1e9,
    "billions": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
    "trillions": 1e12,
    "tn": 1e12,
    "t": 1e12,
    "thousands": 1e3,
}
_CURRENCY = "$€£¥₹"
_NUM = r"[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+\u2212]?\.\d+"
_NUMBER_RE = re.compile(
    rf"(?P<neg>\()?\s*(?P<cur>[{_CURRENCY}])?\s*(?P<num>{_NUM})\s*(?P<pct>%|percent\b|per cent\b)?"
    rf"\s*(?P<scale>thousands?|millions?|billions?|trillions?|mn|mm|bn|tn|[kmbt](?![a-z]))?\s*(?P<close>\))?",
    re.IGNORECASE,
)


_MAX_NUMBER_CHARS = 200
"""Longer than this, a text is not one number (``parse_number``)."""


def _bounded(text: str) -> str:
    """NFKC ``text`` with each whitespace run made one space: the number pattern's adjacent ``\\s*`` cost
    cubic time in the length of a run (an answer of a digit, 2,000 spaces and a letter held a host for a minute)."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def extract_tagged(text: str, tag: str | None) -> str | None:
    """The content of the last ``<tag>...</tag>`` in ``text`` (None if absent); the whole text if tag is None."""
    if tag is None:
        return text.strip()
    # the pairs findall(<tag>(.*?)</tag>) would give, found in one pass (that regex rescans to the end
    # from every unclosed <tag>: quadratic in an agent's answer)
    opening = re.compile(rf"<{re.escape(tag)}>", re.IGNORECASE)
    closing = re.compile(rf"</{re.escape(tag)}>", re.IGNORECASE)
    last, pos = None, 0
    while (o := opening.search(text, pos)) and (c := closing.search(text, o.end())):
        last, pos = text[o.end() : c.start()], c.end()
    return last.strip() if last is not None else None


def normalize_text(text: str) -> str:
    """Lowercase, unify unicode, drop punctuation and articles, collapse whitespace."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = text.replace("\u2019", "'").replace("\u2013", "-").replace("\u2014", "-")
    text = "".join(" " if ch in string.punctuation else ch for ch in text)
    words = [w for w in text.split() if w not in {"a", "an", "the"}]
    return " ".join(words)


def _value(m: re.Match[str]) -> tuple[float, bool]:
    raw = m.group("num").replace(",", "").replace("\u2212", "-")
    value = float(raw)
    if m.group("scale"):
        value *= _SCALES[m.group("scale").lower()]
    if m.group("neg") and m.group("close") and value > 0:
        value = -value
    return value, bool(m.group("pct"))


def parse_number(text: str) -> tuple[float, bool] | None:
    """Read ``text`` as one number: (value, is_percent), or None if it is not just a number.

    "1.5 million" -> (1.5e6, False); "$1,234" -> (1234.0, False); "12%" -> (12.0, True);
    "(300)" -> (-300.0, False).
    """
    s = _bounded(text).rstrip(".").strip()
    if len(s) > _MAX_NUMBER_CHARS:
        return None
    s = re.sub(r"^(?:approximately|approx\.?|about|around|~|≈)\s*", "", s, flags=re.IGNORECASE)
    s = re.sub(r"\s*(?:usd|dollars?|eur|euros?)$", "", s, flags=re.IGNORECASE)
    s = re.sub(r"^(?:usd|eur)\s*", "", s, flags=re.IGNORECASE)
    m = _NUMBER_RE.fullmatch(s)
    if not m or (m.group("neg") is None) != (m.group("close") is None):
        return None
    try:
        value, pct = _value(m)
    except (ValueError, OverflowError):
        return None
    return (value, pct) if math.isfinite(value) else None


def numbers_in(text: str) -> list[tuple[float, bool]]:
    """Every number in free text, in order (same reading as parse_number)."""
    out = []
    for m in _NUMBER_RE.finditer(_bounded(text)):
        try:
            value, pct = _value(m)
        except (ValueError, OverflowError):
            continue
        if math.isfinite(value):
            out.append((value, pct))
    return out


def _close(got: float, want: float, tolerance: float) -> bool:
    if want == 0:
        return abs(got) <= 1e-9
    return abs(got - want) <= tolerance * abs(want) + 1e-12


def _numbers_match(got: tuple[float, bool], want: tuple[float, bool], tolerance: float) -> bool:
    g, g_pct = got
    w, w_pct = want
    if g_pct == w_pct:
        return _close(g, w, tolerance)
    # "12%" vs "0.12": accept either reading of the bare number
    if w_pct:
        return _close(g * 100, w, tolerance) or _close(g, w, tolerance)
    return _close(g / 100, w, tolerance) or _close(g, w, tolerance)


def match_answer(candidate: str | None, expected: str, tolerance: float = 0.05) -> bool:
    """True if ``candidate`` answers ``expected``: numerically within tolerance, else as normalised text.

    For a numeric expected value, a candidate that is not a bare number matches when its last
    number does ("The total is 1.5 million" matches "1,500,000").
    """
    if candidate is None:
        return False
    want = parse_number(expected)
    if want is not None:
        got = parse_number(candidate)
        if got is None:
            found = numbers_in(candidate)
            got = found[-1] if found else None
        return got is not None and _numbers_match(got, want, tolerance)
    return normalize_text(candidate) == normalize_text(expected) and bool(normalize_text(expected))
