"""Answer matching: numbers with units and tolerance, normalised text, tag extraction."""

from __future__ import annotations

import pytest

from clawgym_env.grading.answer import extract_tagged, match_answer, normalize_text, numbers_in, parse_number


@pytest.mark.parametrize(
    ("text", "value", "pct"),
    [
        ("42", 42.0, False),
        ("1.5 million", 1.5e6, False),
        ("$1,234.50", 1234.5, False),
        ("2.3bn", 2.3e9, False),
        ("3 thousand", 3000.0, False),
        ("12%", 12.0, True),
        ("12 percent", 12.0, True),
        ("(300)", -300.0, False),
        ("-7.25", -7.25, False),
        ("1e3", 1000.0, False),
        ("approximately 5.5 Billion", 5.5e9, False),
        ("4.2 trillion", 4.2e12, False),
        ("€ 10", 10.0, False),
        ("900 USD", 900.0, False),
        ("15k", 15000.0, False),
    ],
)
def test_parse_number(text: str, value: float, pct: bool) -> None:
    got = parse_number(text)
    assert got is not None and got[0] == pytest.approx(value) and got[1] is pct


@pytest.mark.parametrize("text", ["", "abc", "12 apples and 3 pears", "(300", "1,23,4", "nan", "inf"])
def test_parse_number_rejects_non_numbers(text: str) -> None:
    assert parse_number(text) is None


@pytest.mark.parametrize(
    ("candidate", "expected", "ok"),
    [
        ("1,500,000", "1.5 million", True),
        ("1.52 million", "1.5 million", True),  # within 5%
        ("1.6 million", "1.5 million", False),  # 6.7% off
        ("1.5 billion", "1.5 million", False),
        ("The total is $233,950 million.", "233.95 billion", True),
        ("0.125", "12.5%", True),
        ("12.5", "12.5%", True),
        ("12.5%", "0.125", True),
        ("13%", "12.5%", True),
        ("20%", "12.5%", False),
        ("0", "0", True),
        ("0.001", "0", False),
        ("Paris", "paris", True),
        ("  The Eiffel-Tower!  ", "eiffel tower", True),
        ("Eiffel Towers", "eiffel tower", False),
        (None, "42", False),
        ("no number here", "42", False),
        ("", "", False),
    ],
)
def test_match_answer(candidate: str | None, expected: str, ok: bool) -> None:
    assert match_answer(candidate, expected, 0.05) is ok


def test_tolerance_is_respected() -> None:
    assert match_answer("104", "100", 0.05) and not match_answer("104", "100", 0.01)
    assert match_answer("100", "100", 0.0) and not match_answer("100.5", "100", 0.0)


def test_extract_tagged_takes_the_last_tag() -> None:
    text = "thinking <answer>draft</answer> ... final <ANSWER> 42 </ANSWER>"
    assert extract_tagged(text, "answer") == "42"
    assert extract_tagged("no tags", "answer") is None
    assert extract_tagged("  whole  ", None) == "whole"


def test_normalize_and_numbers_in() -> None:
    assert normalize_text("The  Quick, brown FOX.") == "quick brown fox"
    assert [v for v, _ in numbers_in("from 3 to 4.5 million, up 7%")] == [3.0, 4.5e6, 7.0]
