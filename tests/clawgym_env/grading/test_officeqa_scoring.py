"""OfficeQA answers get the official scorer's verdict, on every row of the conformance table, in bounded time.

The table ``tests/fixtures/officeqa/conformance.csv.gz`` was made by
``tests/fixtures/officeqa/make_conformance.py``: for each of the 244 distinct reference answers of
OfficeQA's 246 questions (``officeqa_full.csv``, the shared real question set) it writes some 120
candidate answers (the reference reformatted, rounded, rescaled, with units, currency and percent
signs, lists reordered and reshaped, sentences around it, ranges, hedges, markup, exotic spaces and
digits, random small edits, wrong values and values off by 0.05-5 %) and scores each at the four
official tolerances with the official ``score_answer`` of databricks/officeqa ``reward.py`` at
commit 7b9a3c154ef9fb40215bb67934afc43e6799de16 (``reward.py`` last changed in 309dc01), run out of
tree. ``conformance.json`` records the commit and the hashes of the scorer, the questions and the table.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from pathlib import Path

import pytest

from clawgym_env.grading.officeqa_scoring import OFFICIAL_TOLERANCES, final_answer, officeqa_verdict
from tests.security.test_linear_parsing import BOUND, FACTOR, growth

TABLE = Path(__file__).resolve().parents[2] / "fixtures" / "officeqa"
TWELVE = "[374,443, 381,327, 401,845, 433,432, 461,855, 478,957, 505,483, 595,307, 664,852, 731,821, 798,733, 854,741]"


def test_every_row_of_the_official_conformance_table() -> None:
    meta = json.loads((TABLE / "conformance.json").read_text())
    raw = gzip.decompress((TABLE / "conformance.csv.gz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() == meta["table_sha256"]
    assert meta["commit"] == "7b9a3c154ef9fb40215bb67934afc43e6799de16"
    rows = list(csv.DictReader(io.StringIO(raw.decode("utf-8"), newline="")))
    assert len(rows) == meta["rows"] > 100_000
    assert len({r["ground_truth"] for r in rows}) == meta["reference_answers"] == 244
    assert {float(r["tolerance"]) for r in rows} == set(OFFICIAL_TOLERANCES)
    assert 0.3 < sum(r["official"] == "1" for r in rows) / len(rows) < 0.7  # both verdicts well represented
    wrong = [
        (r["ground_truth"], r["candidate"], r["tolerance"], r["official"])
        for r in rows
        if str(int(officeqa_verdict(r["ground_truth"], r["candidate"], float(r["tolerance"]))[0])) != r["official"]
    ]
    assert not wrong, f"{len(wrong)} rows differ from the official verdict, e.g. {wrong[:5]}"


@pytest.mark.parametrize(
    ("reference", "response", "tolerance", "passed"),
    [
        ("2,602", "2,602", 0.0, True),
        ("2,602", "<FINAL_ANSWER>2602</FINAL_ANSWER>", 0.0, True),
        ("2,602", "2628.02", 0.0, False),  # 1 % off fails at the default tolerance
        ("2,602", "2628.02", 0.01, True),  # and passes at 1 %
        ("2,602", "between 2550 and 2654", 0.05, False),  # a range is not a direct answer
        ("2,602", "2602 or 2654", 0.0, False),  # nor a hedge
        ("2,602", "The answer is 2,602", 0.0, True),  # prose around one number is allowed
        ("2,602", "2,602 (1953)", 0.0, True),  # a stray year is not counted
        ("36080 million", "36.08 billion", 0.05, False),  # unit words must agree
        ("[0.096, −184.143]", "[-184.143, 0.096]", 0.0, False),  # lists match in order
        ("[0.096, −184.143]", "0.096, -184.143", 0.0, True),
        ("March 3, 1977", "march 3, 1977", 0.0, True),
        ("March 3, 1977", "3 March 1977", 0.0, True),  # numbers and prose, in any order
        ("March 3, 1977", "April 3, 1977", 0.0, False),
        ("2,602", "<FINAL_ANSWER>2,602</FINAL_ANSWER> <FINAL_ANSWER>7</FINAL_ANSWER>", 0.0, False),  # the last tag counts
        ("2,602", "I checked.\n2,602", 0.0, False),  # no tag: the whole reply must be the answer
        ("2,602", "Unable to determine; best guess 2,602", 0.0, False),
    ],
)
def test_official_rule_on_readable_cases(reference: str, response: str, tolerance: float, passed: bool) -> None:
    assert officeqa_verdict(reference, response, tolerance)[0] is passed


def test_other_tag_names_when_a_suite_asks_for_them() -> None:
    assert final_answer("x <answer> 5 </answer>", "answer") == "5"
    assert officeqa_verdict("5", "work...\n<answer>5</answer>", 0.0, tag="answer")[0]
    assert not officeqa_verdict("5", "work...\n<answer>5</answer>", 0.0)[0]  # FINAL_ANSWER is the default tag
    with pytest.raises(ValueError, match="tolerance"):
        officeqa_verdict("5", "5", 5.0)


def test_the_official_scorers_slowest_list_is_decided_by_splitting_not_enumerating() -> None:
    """The official scorer enumerates every comma split of this answer: 50-85 s per call when the table was
    made. Our splits are counted by dynamic programming (its row is in the table; here, its verdicts)."""
    squeezed = "[" + TWELVE[1:-1].replace(", ", ",") + "]"
    assert officeqa_verdict(TWELVE, squeezed, 0.0)[0]
    assert not officeqa_verdict(TWELVE, squeezed.replace("854,741", "854,742"), 0.0)[0]
    assert officeqa_verdict(TWELVE, squeezed.replace("854,741", "854,742"), 0.001)[0]


_ADVERSARIAL = {
    # a reply full of unclosed tags, tag pairs, and a huge answer inside one pair
    "unclosed tags": (lambda n: "<FINAL_ANSWER>" * n, 4_000),
    "tag pairs": (lambda n: "<FINAL_ANSWER>1</FINAL_ANSWER> " * n, 2_000),
    "huge tagged answer": (lambda n: "<FINAL_ANSWER>" + "1,1" * n + "</FINAL_ANSWER>", 20_000),
    # no tag: the whole reply, digits and commas the list splitter would explode on, spaces, brackets
    "digits and commas": (lambda n: "[" + "111," * n + "1]", 20_000),
    "spaces between digits": (lambda n: "1" + " " * n + "x", 40_000),
    "brackets": (lambda n: "[" * n + "1" + "]" * n, 20_000),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(_ADVERSARIAL))
def test_verdict_time_grows_linearly_with_the_reply(name: str) -> None:
    make, n = _ADVERSARIAL[name]
    ratio = growth(lambda s: officeqa_verdict(TWELVE, s, 0.01), make, n)
    assert ratio < BOUND, f"{name}: {FACTOR}x the reply took {ratio:.0f}x the time (super-linear)"


@pytest.mark.timeout(60)
def test_a_ten_megabyte_reply_is_read_once_and_refused() -> None:
    for reply in (
        "<FINAL_ANSWER>" * 700_000,
        "1," * 5_000_000,
        "2602 " * 2_000_000,
        "x" * 10_000_000 + "<FINAL_ANSWER>2,602</FINAL_ANSWER>",
    ):
        passed, why = officeqa_verdict("2,602", reply, 0.0)
        assert passed is reply.endswith("</FINAL_ANSWER>"), why
