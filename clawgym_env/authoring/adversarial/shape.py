"""The shape of a reference output without its substance: what shape-without-substance attempts write.

A grader must not pay for the structure of a right answer. These functions turn the text the
reference solution wrote into forms that keep its structure and drop what it says: no records
(``no_rows``), every record kept with no text in it (``hollow``), and every value replaced by one
of the same format that the inputs do not support (``fake``). Strategies only ever see these forms,
never the reference text itself.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
import zlib
from collections.abc import Callable
from pathlib import PurePosixPath

__all__ = ["Faker", "fake", "hollow", "input_pool", "no_rows", "tokens_of", "words_of"]

_TAG_RE = re.compile(r"\[[A-Z][A-Z0-9_ ]{0,30}\]|\{[A-Za-z_]\w{0,30}\}")
_BULLET_RE = re.compile(r"^(\s*(?:[-*+]|\d+[.)])\s+)")
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_TOKEN_RE = re.compile(
    r"(?P<tag>\[[A-Z][A-Z0-9_ ]{0,30}\]|\{[A-Za-z_]\w{0,30}\})"
    r"|(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?)"
    r"|(?P<date>\d{4}-\d{2}-\d{2})"
    r"|(?P<time>(?<!\d)\d{1,2}:\d{2}(?::\d{2})?(?!\d))"
    r"|(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)*)"
    r"|(?P<word>[^\W\d_][\w'-]*)"
)
_FILLERS_UPPER = ["Zarvek", "Quillon", "Brovasz", "Tessaly", "Vimmert", "Oskund", "Halvric", "Jorvane"]
_FILLERS_LOWER = ["lorem", "ipsum", "dolor", "amet", "quux", "zorp", "vrell", "frobn"]
_MAX_LEN = 64_000


def words_of(text: str) -> set[str]:
    """Every word of ``text``, lowercased: what an instruction names counts as structure, not content."""
    return {w.lower() for w in re.findall(r"[^\W\d_][\w'-]*", text)}


def _suffix(path: str) -> str:
    return PurePosixPath(path).suffix.lower()


def _csv_rows(text: str) -> list[list[str]] | None:
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error:
        return None
    return [r for r in rows if r] or None


def _csv_text(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _blank(value: object, keep: set[str], drop_records: bool) -> object:
    if isinstance(value, dict):
        kept = {k: _blank(v, keep, drop_records) for k, v in value.items() if str(k).lower() in keep}
        return kept
    if isinstance(value, list):
        return [] if drop_records else [_blank(v, keep, drop_records) for v in value]
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return 0
    return None if value is None else ""


def _hollow_line(line: str, keep: set[str]) -> str:
    heading = _HEADING_RE.match(line)
    if heading:
        return line if words_of(heading.group(2)) <= keep else heading.group(1)
    if line.lstrip().startswith("|"):
        cells = line.strip().strip("|").split("|")
        if all(set(c.strip()) <= set("-: ") for c in cells):
            return line
        return "|" + "|".join(" " for _ in cells) + "|"
    bullet = _BULLET_RE.match(line)
    tags = _TAG_RE.findall(line)
    return (bullet.group(1) if bullet else "") + " ".join(tags)


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def hollow(path: str, text: str, keep: set[str]) -> str | None:
    """``text`` with every record kept and no text in it: CSV rows with every cell empty, JSON with every value
    blank (keys the instruction names kept), other text reduced to its markup (headings the instruction names,
    bullets, table pipes, ``[TAG]`` placeholders). None for code and for what cannot be parsed."""
    suffix = _suffix(path)
    if suffix in (".csv", ".tsv"):
        rows = _csv_rows(text)
        return None if rows is None else _csv_text([rows[0]] + [[""] * len(r) for r in rows[1:]])
    if suffix == ".json":
        data = _json(text)
        return None if data is None else json.dumps(_blank(data, keep, False), indent=2) + "\n"
    if suffix in _CODE:
        return None
    return "\n".join(_hollow_line(ln, keep) for ln in text.splitlines()) + "\n"


def no_rows(path: str, text: str, keep: set[str]) -> str | None:
    """``text`` with its structure and no records: the CSV header alone, JSON with every collection empty,
    only the headings the instruction names. None for code and for what cannot be parsed."""
    suffix = _suffix(path)
    if suffix in (".csv", ".tsv"):
        rows = _csv_rows(text)
        return None if rows is None else _csv_text(rows[:1])
    if suffix == ".json":
        data = _json(text)
        return None if data is None else json.dumps(_blank(data, keep, True), indent=2) + "\n"
    if suffix in _CODE:
        return None
    lines = [ln for ln in text.splitlines() if (m := _HEADING_RE.match(ln)) and words_of(m.group(2)) <= keep]
    return "".join(f"{ln}\n\n" for ln in lines) or None


_CODE = {".py", ".sh", ".bash", ".sql", ".js", ".ts", ".rb", ".go", ".rs", ".java", ".c", ".h", ".cpp", ".pl", ".r"}


class Faker:
    """Replaces each value with another of the same format: times, dates and numbers shifted, words the
    instruction does not use swapped for made-up ones, or (``pool``) for other values of the same kind
    taken from the inputs. The same value always becomes the same replacement, never itself."""

    def __init__(self, keep: set[str], pool: dict[str, list[str]] | None = None, avoid: set[str] | None = None) -> None:
        self.keep = keep
        self.pool = pool
        self.avoid = avoid or set()  # never picked: the values of the text faked (a swap among them could be right)

    def _pick(self, kind: str, original: str, fallback: Callable[[str], str]) -> str:
        options = [v for v in (self.pool or {}).get(kind, []) if v != original and v not in self.avoid]
        if self.pool is None or not options:
            return fallback(original)
        return options[zlib.crc32(original.encode()) % len(options)]

    def token(self, m: re.Match[str]) -> str:
        kind, text = m.lastgroup or "", m.group(0)
        if kind == "tag" or (kind == "word" and text.lower() in self.keep):
            return text
        if kind == "word":
            pool_kind = "Word" if text[:1].isupper() else "word"
            names = _FILLERS_UPPER if text[:1].isupper() else _FILLERS_LOWER
            return self._pick(pool_kind, text, lambda t: names[zlib.crc32(t.encode()) % len(names)])
        return self._pick(kind, text, _SHIFT[kind])

    def text(self, text: str) -> str:
        return _TOKEN_RE.sub(self.token, text[:_MAX_LEN])

    def value(self, value: object) -> object:
        if isinstance(value, dict):
            return {(k if str(k).lower() in self.keep else self.text(str(k))): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, bool):
            return not value
        if isinstance(value, (int, float)):
            picked = self._pick("num", str(value), _shift_num).replace(",", "")
            try:
                return int(picked) if isinstance(value, int) and picked.isdigit() else float(picked)
            except ValueError:
                return value * 2 + 7
        return self.text(value) if isinstance(value, str) else value


def _shift_ts(text: str) -> str:
    fmt = "%Y-%m-%dT%H:%M:%S" if text.count(":") == 2 else "%Y-%m-%dT%H:%M"
    try:
        return (dt.datetime.strptime(text, fmt) + dt.timedelta(days=1, minutes=137)).strftime(fmt)
    except ValueError:
        return text[::-1]


def _shift_date(text: str) -> str:
    try:
        return (dt.date.fromisoformat(text) + dt.timedelta(days=9)).isoformat()
    except ValueError:
        return "2000-01-01"


def _shift_time(text: str) -> str:
    parts = [int(x) for x in text.split(":")]
    minutes = (parts[0] * 60 + parts[1] + 137) % 1440
    out = f"{minutes // 60:0{len(text.split(':')[0])}d}:{minutes % 60:02d}"
    return out + (f":{parts[2]:02d}" if len(parts) == 3 else "")


def _shift_num(text: str) -> str:
    if text.startswith("-"):
        return "-" + _shift_num(text[1:])
    if re.fullmatch(r"\d+(?:,\d{3})+", text):
        return f"{int(text.replace(',', '')) * 2 + 7:,}"
    if re.fullmatch(r"\d+", text):
        return str(int(text) * 2 + 7)
    if re.fullmatch(r"\d+\.\d+", text):
        decimals = len(text.split(".")[1])
        return f"{float(text) * 1.7 + 1.3:.{decimals}f}"
    return ".".join(str(int(p) + 1) if p.isdigit() else p for p in re.split(r"[.,]", text))


_SHIFT: dict[str, Callable[[str], str]] = {"ts": _shift_ts, "date": _shift_date, "time": _shift_time, "num": _shift_num}


def tokens_of(text: str) -> set[str]:
    """Every value ``Faker`` would replace in ``text``."""
    return {m.group(0) for m in _TOKEN_RE.finditer(text[:_MAX_LEN])}


def input_pool(text: str) -> dict[str, list[str]]:
    """Values of each kind found in ``text`` (the inputs), in order of first appearance."""
    pool: dict[str, list[str]] = {}
    for m in _TOKEN_RE.finditer(text[:400_000]):
        kind = m.lastgroup or ""
        if kind == "word":
            kind = "Word" if m.group(0)[:1].isupper() else "word"
        bucket = pool.setdefault(kind, [])
        if len(bucket) < 500 and m.group(0) not in bucket:
            bucket.append(m.group(0))
    return pool


def fake(path: str, text: str, faker: Faker) -> str | None:
    """``text`` in the same format with every value replaced (see ``Faker``); the CSV header and JSON keys the
    instruction names stay. None for code, for JSON that cannot be parsed and where nothing would change."""
    suffix = _suffix(path)
    if suffix in _CODE:
        return None
    if suffix == ".json":
        data = _json(text)
        faked_data = None if data is None else faker.value(data)
        return None if faked_data is None or faked_data == data else json.dumps(faked_data, indent=2) + "\n"
    if suffix in (".csv", ".tsv"):
        head, _, body = text.partition("\n")
        faked = head + "\n" + faker.text(body)
    else:
        faked = faker.text(text)
    return None if faked.strip() == text.strip() else faked
