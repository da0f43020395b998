"""OfficeQA's official answer rule, reimplemented to give the same verdicts in bounded time.

The rule is the one databricks/officeqa's ``reward.py`` applies (``score_answer``); the conformance
table in ``tests/fixtures/officeqa/`` holds the official verdicts this module reproduces. In short:
the answer is the last ``<FINAL_ANSWER>...</FINAL_ANSWER>`` (the whole reply when there is none);
it must be a *direct* answer (one line, at most 250 characters, as many numbers as the reference,
no markup; a text reference must match exactly after case, quotes and parentheticals are dropped);
then each reference number must appear within the relative tolerance with a compatible unit word
(thousand, million, billion, trillion and their one-letter forms, read from 20 characters around
the number), prose in the reference must appear in the answer, and a bracketed list must match in
order. Stray years (1900-2100) in an answer are ignored unless the reference holds a year or text.

Answers are agent output parsed on the host, so every step is bounded: the tags are found in one
linear scan, the answer is cut at 250 characters before any number is read (a longer one fails
the direct-answer rule anyway), no pattern nests open-ended quantifiers, and a list is split by dynamic
programming rather than by trying every split (the official scorer's enumeration takes minutes
on some 12-item lists).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from clawgym_env.grading.answer import extract_tagged

__all__ = ["FINAL_ANSWER_TAG", "MAX_DIRECT_ANSWER_CHARS", "OFFICIAL_TOLERANCES", "final_answer", "officeqa_verdict"]

FINAL_ANSWER_TAG = "FINAL_ANSWER"
MAX_DIRECT_ANSWER_CHARS = 250
OFFICIAL_TOLERANCES = (0.0, 0.001, 0.01, 0.05)
"""The relative tolerances OfficeQA reports results at (0 %, 0.1 %, 1 %, 5 %)."""

_CURRENCY = "$£€¥₹¢₩₽"
_WS = re.compile(r"\s+")
_ACCOUNTING = re.compile(rf"\(\s*([{_CURRENCY}])?\s*(\d{{1,3}}(?:,\d{{3}})*(?:\.\d+)?|\d+(?:\.\d+)?)\s*\)")
_CURRENCY_SIGN = re.compile(rf"[{_CURRENCY}]")
_GROUPED = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)")
_TOKEN = re.compile(r"-?\d+\.?\d*%?")
_LIST_ITEM = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?")
_BRACKETED = re.compile(r"\[([^\[\]]+)\]")
_PARENTHETICAL = re.compile(r"\([^)]*\)")
_MARKUP = re.compile(r"<[^>]*>")
_SPACE_AT_COMMA = re.compile(r"\s,|,\s")
_UNITS = (
    ("trillion", re.compile(r"\btrillions?\b")),
    ("billion", re.compile(r"\bbillions?\b|\bb\b")),
    ("million", re.compile(r"\bmillions?\b|\bm\b")),
    ("thousand", re.compile(r"\bthousands?\b|\bk\b")),
)
_UNIT_WORDS = tuple(
    re.compile(rf"\b{w}\b")
    for w in (
        "trillion",
        "trillions",
        "billion",
        "billions",
        "million",
        "millions",
        "thousand",
        "thousands",
        "hundred",
        "hundreds",
        "percent",
        "percentage",
        "%",
    )
)
_PUNCTUATION = re.compile(r"[^\w\s]")
_DIGIT = re.compile(r"\d")


def final_answer(response: str, tag: str | None = FINAL_ANSWER_TAG) -> str:
    """The text the official rule scores: the last ``<tag>`` content, else the whole reply."""
    found = extract_tagged(response, tag) if tag else None
    return response if found is None else found


def _squash(text: str) -> str:
    """Unicode minus to '-', whitespace runs to one space, ends stripped."""
    return _WS.sub(" ", text.replace("\u2212", "-")).strip()


def _is_year(value: float) -> bool:
    return 1900 <= value <= 2100 and value == int(value)


def _plain_numbers(text: str) -> str:
    """Accounting negatives "(1,234)" to "-1,234" (a bare year in parentheses stays), currency signs dropped."""

    def negative(m: re.Match[str]) -> str:
        if m.group(1) is None and _is_year(float(m.group(2).replace(",", ""))):
            return m.group(0)
        return "-" + m.group(2)

    return _CURRENCY_SIGN.sub("", _ACCOUNTING.sub(negative, text))


@dataclass(frozen=True)
class _Number:
    value: float
    context: str
    """Up to 20 characters either side, lowercased: where unit words are read from."""

    @cached_property
    def unit(self) -> str | None:
        for name, pattern in _UNITS:
            if pattern.search(self.context):
                return name
        return None


def _numbers(text: str) -> list[_Number]:
    """Every number in ``text`` with its context, read the official way."""
    flat = _plain_numbers(_squash(text))
    flat = _GROUPED.sub(lambda m: m.group(0).replace(",", ""), flat)
    out = []
    for m in _TOKEN.finditer(flat):
        context = flat[max(0, m.start() - 20) : m.end() + 20].lower()
        out.append(_Number(float(m.group(0).rstrip("%")), context))
    return out


def _prose(text: str) -> str:
    """What is left of ``text`` once numbers, commas, unit words and punctuation are gone."""
    cleaned = _TOKEN.sub("", _squash(text).lower()).replace(",", "")
    for word in _UNIT_WORDS:
        cleaned = word.sub("", cleaned)
    return _WS.sub(" ", _PUNCTUATION.sub(" ", cleaned)).strip()


def _prose_agrees(want: str, answer: str) -> bool:
    """Prose in the reference (``want``: "march" of "March 1977") must appear in the answer, or the answer's in it."""
    got = _prose(answer)
    if len(want) < 2:
        return True
    return len(got) >= 2 and (want in got or got in want)


def _close(want: float, got: float, tolerance: float) -> bool:
    if want == 0:
        return got == 0
    return abs(want - got) / abs(want) <= tolerance


def _units_agree(a: str | None, b: str | None) -> bool:
    return a is None or b is None or a == b


def _bracket_body(text: str) -> str | None:
    """The inside of the one bracketed list in ``text`` when nothing outside it holds a digit."""
    flat = _squash(text)
    found = list(_BRACKETED.finditer(flat))
    if len(found) != 1:
        return None
    m = found[0]
    outside = flat[: m.start()] + flat[m.end() :]
    return None if _DIGIT.search(outside) else m.group(1)


def _list_item(raw: str) -> float | None:
    """One list item as a number, or None: "1,234", "-5.2%", "($12)" are items; "1, 234" is not."""
    item = raw.strip()
    if not item or ("," in item and _SPACE_AT_COMMA.search(item)):
        return None
    item = _plain_numbers(_squash(item))
    if _LIST_ITEM.fullmatch(item) is None:
        return None
    return float(item.rstrip("%").replace(",", ""))


class _CommaSplits:
    """The ways to cut a comma-separated text into consecutive items that each read as one number.

    Chunks are the pieces between commas; an item is a run of chunks. An item spanning several
    chunks must be a thousands-grouped number, so every chunk inside it is three digits (currency
    signs aside): that prunes the runs to try, and the splits are counted by dynamic programming
    over chunk positions (bit sets of item counts), never enumerated.
    """

    def __init__(self, body: str) -> None:
        cuts = [-1, *(i for i, ch in enumerate(body) if ch == ","), len(body)]
        self.spans = [(cuts[k] + 1, cuts[k + 1]) for k in range(len(cuts) - 1)]
        chunks = [body[a:b] for a, b in self.spans]
        self.items: list[list[tuple[int, float]]] = []
        """items[i]: (j, value) for every run of chunks i..j that reads as one number."""
        for i in range(len(chunks)):
            runs: list[tuple[int, float]] = []
            for j in range(i, len(chunks)):
                value = _list_item(body[self.spans[i][0] : self.spans[j][1]])
                if value is not None:
                    runs.append((j, value))
                # chunk j is about to become the head (j == i) or the inside of a longer run
                if not (_may_head_group(chunks[j]) if j == i else _is_digit_triple(chunks[j])):
                    break
            self.items.append(runs)

    def can_split(self, count: int) -> bool:
        """Whether the whole text splits into exactly ``count`` number items."""
        n = len(self.spans)
        reach = [0] * (n + 1)
        reach[n] = 1  # bit r: the chunks from here on split into r items
        for i in range(n - 1, -1, -1):
            bits = 0
            for j, _value in self.items[i]:
                bits |= reach[j + 1] << 1
            reach[i] = bits
        return bool(reach[0] >> count & 1)

    def matches(self, wanted: list[float], accept: object) -> bool:
        """Whether some split gives exactly ``len(wanted)`` items, item k accepted against ``wanted[k]``."""
        n, m = len(self.spans), len(wanted)
        ok = [[False] * (m + 1) for _ in range(n + 1)]
        ok[n][m] = True
        for i in range(n - 1, -1, -1):
            for k in range(m):
                ok[i][k] = any(
                    ok[j + 1][k + 1] and accept(wanted[k], value)  # type: ignore[operator]  # bool and bool
                    for j, value in self.items[i]
                )
        return ok[0][0]


def _digits_only(chunk: str) -> str:
    return _CURRENCY_SIGN.sub("", chunk)


def _is_digit_triple(chunk: str) -> bool:
    """Whether ``chunk`` can sit inside a thousands-grouped item: three digits, currency signs aside."""
    core = _digits_only(chunk)
    return len(core) == 3 and core.isdecimal()


def _may_head_group(chunk: str) -> bool:
    """Whether ``chunk`` can start a thousands-grouped item ("-$1", "(12", "123"): one to three digits."""
    return 1 <= len(_DIGIT.findall(chunk)) <= 3


def _splits(text: str, count: int) -> _CommaSplits | None:
    """The comma splits of an answer (its bracketed list if it has one), when ``count`` items could fit."""
    if count < 2:
        return None
    body = _bracket_body(text) or _squash(text)
    splits = _CommaSplits(body)
    return splits if len(splits.spans) >= count else None


@dataclass(frozen=True)
class _Reference:
    """What the rule reads from a reference answer (computed once per reference)."""

    text: str
    numbers: list[_Number]
    prose: str
    listed: bool
    """A bracketed list whose comma-separated items are exactly its numbers, in order."""
    direct_text: str

    def drop_stray_years(self, got: list[_Number]) -> list[_Number]:
        """The answer's numbers without incidental years, unless the reference holds a year (or, for one
        number, prose such as "March 1977")."""
        want = self.numbers
        if not want:
            return got
        if len(want) == 1:
            keep_years = _is_year(want[0].value) or len(self.prose) >= 2
        else:
            keep_years = any(_is_year(n.value) for n in want)
        return got if keep_years else [n for n in got if not _is_year(n.value)]


@lru_cache(maxsize=1024)
def _reference(text: str) -> _Reference:
    numbers = _numbers(text)
    body = _bracket_body(text)
    listed = False
    if body is not None and len(numbers) >= 2:
        splits = _splits(body, len(numbers))
        listed = splits is not None and splits.matches([n.value for n in numbers], lambda want, got: want == got)
    return _Reference(text, numbers, _prose(text), listed, _direct_text(text))


def _in_order(want: list[_Number], got: list[_Number], tolerance: float) -> bool:
    return len(want) == len(got) and all(
        _units_agree(w.unit, g.unit) and _close(w.value, g.value, tolerance) for w, g in zip(want, got, strict=True)
    )


def _direct_text(text: str) -> str:
    cleaned = _PARENTHETICAL.sub("", text.strip().lower().strip('"').strip("'")).strip()
    return _WS.sub(" ", cleaned)


def _is_direct(ref: _Reference, answer: str, got: list[_Number]) -> tuple[bool, str]:
    """The official direct-answer guard: one line, short, the reference's shape, no markup."""
    if not answer:
        return False, "empty answer"
    if sum(1 for line in answer.splitlines() if line.strip()) > 1:
        return False, "answer spans several lines"
    if len(answer) > MAX_DIRECT_ANSWER_CHARS:
        return False, f"answer longer than {MAX_DIRECT_ANSWER_CHARS} characters"
    if ref.numbers:
        if len(ref.drop_stray_years(got)) != len(ref.numbers):
            splits = _splits(answer, len(ref.numbers)) if ref.listed else None
            if splits is None or not splits.can_split(len(ref.numbers)):
                return False, f"answer must hold exactly the {len(ref.numbers)} number(s) of the reference"
        if _MARKUP.search(answer):
            return False, "answer holds markup"
        return True, ""
    if got:
        return False, "answer holds numbers, the reference none"
    if ref.direct_text != _direct_text(answer):
        return False, "text answer differs from the reference"
    return True, ""


def _list_matches(ref: _Reference, answer: str, got: list[_Number], tolerance: float) -> bool:
    """The ordered-list rule: some comma split of the answer, or its numbers as read, match item by item."""
    splits = _splits(answer, len(ref.numbers))
    if splits is not None and splits.matches([n.value for n in ref.numbers], lambda w, g: _close(w, g, tolerance)):
        return True
    return _in_order(ref.numbers, ref.drop_stray_years(got), tolerance)


def _matches(ref: _Reference, answer: str, got: list[_Number], tolerance: float) -> bool:
    """The official match of a direct answer: numbers within tolerance with compatible units, and prose."""
    if "unable to determine" in answer.lower():
        return False
    if not (ref.numbers and got):
        return True  # text references reach here only once the direct-answer rule found them equal
    if ref.listed:
        return _list_matches(ref, answer, got, tolerance)
    if not _prose_agrees(ref.prose, answer):
        return False
    pool = (
        ref.drop_stray_years(got)
        if len(ref.numbers) == 1
        else [g for g in got if not _is_year(g.value) or any(_is_year(w.value) for w in ref.numbers)]
    )
    return all(any(_units_agree(w.unit, g.unit) and _close(w.value, g.value, tolerance) for g in pool) for w in ref.numbers)


def officeqa_verdict(reference: str, response: str, tolerance: float = 0.0, tag: str | None = FINAL_ANSWER_TAG) -> tuple[bool, str]:
    """(passed, why not) for ``response`` against the reference answer, by OfficeQA's rule.

    ``response`` may be a whole reply; its last ``<tag>`` (official: ``FINAL_ANSWER``) is scored when
    present, else the whole reply.
    """
    if not reference.strip():
        raise ValueError("the reference answer is empty")
    if not 0.0 <= tolerance <= 1.0:
        raise ValueError(f"tolerance must lie in [0, 1], got {tolerance}")
    answer = final_answer(response, tag).strip() if response else ""
    if len(answer) > MAX_DIRECT_ANSWER_CHARS:
        return False, f"answer longer than {MAX_DIRECT_ANSWER_CHARS} characters"
    if not answer:
        return False, "empty answer"
    ref, got = _reference(reference), _numbers(answer)
    direct, why = _is_direct(ref, answer, got)
    if not direct:
        return False, why
    if _matches(ref, answer, got, tolerance):
        return True, ""
    return False, "answer does not match the reference"
