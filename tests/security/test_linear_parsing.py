"""Host-side parsers of agent output take time linear in its size.

The host process grades every attempt of a run on one event loop: a parser that is quadratic or
worse in what an agent wrote (a final answer, an answer file, a request body its code sends to
the proxy, the work a rubric judge is shown) stops every other attempt with it, and no timeout can fire while it runs. Each parser
below is fed input built to make the patterns it used to run backtrack, at a size ``n`` and at
``16 n``, in this thread's CPU time (other processes on a loaded box do not add to it): linear work
grows about 16x (12-16x measured), quadratic 256x, so the bound of 64x leaves room for caches and
noise and still fails for anything super-linear. The answer, proxy and judge parsers were
super-linear in these inputs (``parse_number``: a minute for one answer of a digit, 2,000 spaces and
a letter; the judge's object search: 100-260x here, and its ``<think>`` pattern ran past the two
minutes allowed on 32,000 unclosed tags).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

import pytest

from clawgym_env.grading.answer import extract_tagged, match_answer, numbers_in, parse_number
from clawgym_env.grading.jobbench_grading import parse_rubric_reply
from clawgym_env.grading.json_in_text import MAX_DEPTH, json_objects
from clawgym_env.grading.judge import _planted, judge_objects, parse_verdict
from clawgym_env.grading.officeqa_scoring import final_answer, officeqa_verdict
from clawgym_env.proxy._json_body import load_body
from clawgym_env.proxy.session import CallFailed
from clawgym_env.task.spec import RubricItem

FACTOR = 16
BOUND = 64
"""Growth allowed from n to FACTOR * n: linear is FACTOR, quadratic FACTOR ** 2."""


def _batch(fn: Callable[[], Any], reps: int) -> float:
    t0 = time.thread_time()  # CPU time of this thread: other processes on the box do not add to it
    for _ in range(reps):
        fn()
    return time.thread_time() - t0


def growth(parse: Callable[[Any], Any], make: Callable[[int], Any], n: int, rounds: int = 3) -> float:
    """How much longer ``parse`` takes on ``make(FACTOR * n)`` than on ``make(n)``: the best of
    ``rounds`` batches each, taken in turn, in CPU time (the box is shared: load only ever adds time)."""
    small, large = make(n), make(FACTOR * n)
    reps, t0 = 0, time.thread_time()
    while time.thread_time() - t0 < 0.01:
        parse(small)
        reps += 1
    best_small = best_large = float("inf")
    for _ in range(rounds):
        best_small = min(best_small, _batch(lambda: parse(small), reps))
        best_large = min(best_large, _batch(lambda: parse(large), reps))
    return best_large / best_small


ITEM = RubricItem(criterion="Names the supplier", options={"yes": 1.0, "no": 0.0})
RUBRIC = RubricItem(criterion="The report", criteria=["names the supplier"])
VERDICT = '{"reasoning": "It does.", "verdict": "yes"}'


def _judged(quoted: str) -> None:
    _planted.cache_clear()  # every call scans the quoted work (the judge reads it once per rubric)
    judge_objects(VERDICT, quoted)


def _rubric_judged(quoted: str) -> None:
    _planted.cache_clear()
    parse_rubric_reply('{"rubric_passed": true}', RUBRIC, quoted)


def _refused(raw: bytes) -> None:
    with pytest.raises(CallFailed):
        load_body(raw)


CASES = {
    # extract_tagged: many unclosed tags (findall rescanned the rest of the text from each)
    "extract_tagged, unclosed tags": (lambda s: extract_tagged(s, "answer"), lambda n: "<answer>" * n, 4_000),
    "extract_tagged, pairs": (lambda s: extract_tagged(s, "answer"), lambda n: "<answer>1</answer> " * n, 2_000),
    # the number pattern's adjacent \s* around a whitespace run that ends in no number
    "parse_number, inner spaces": (parse_number, lambda n: "1" + " " * n + "x", 32_000),
    "parse_number, unit suffix": (parse_number, lambda n: "1" + " " * n + "usdx", 32_000),
    "numbers_in, spaces": (numbers_in, lambda n: " " * n, 32_000),
    "numbers_in, mixed": (numbers_in, lambda n: "( $ 1 , 2 %  million ) " * n, 1_500),
    "match_answer, numeric": (lambda s: match_answer(s, "1.47 billion"), lambda n: "1" + "\n\t " * n + "x", 12_000),
    "match_answer, text": (lambda s: match_answer(s, "Norrvik"), lambda n: "a " * n, 16_000),
    # OfficeQA's official rule (answers tagged <FINAL_ANSWER>)
    "officeqa final_answer, unclosed tags": (final_answer, lambda n: "<FINAL_ANSWER>" * n, 2_000),
    "officeqa verdict, inner spaces": (
        lambda s: officeqa_verdict("1.47 billion", s, 0.0, "FINAL_ANSWER"),
        lambda n: "<FINAL_ANSWER>1" + " " * n + "x</FINAL_ANSWER>",
        32_000,
    ),
    "officeqa verdict, list": (
        lambda s: officeqa_verdict("[1, 2, 3]", s, 0.0, "FINAL_ANSWER"),
        lambda n: "<FINAL_ANSWER>" + "1, " * n + "</FINAL_ANSWER>",
        8_000,
    ),
    # the rubric judge: JSON objects in the agent's work quoted to it (a failed decode at every brace
    # counted the lines up to it), and <think> blocks in the judge's reply (each unclosed one rescanned the rest)
    "judge objects, brace lines": (_judged, lambda n: "{\n" * n, 2_000),
    "judge objects, braces in strings": (_judged, lambda n: '{"{"' * n, 2_000),
    "judge objects, unclosed nesting": (_judged, lambda n: '{"a": [\n' * n, 50),
    "judge verdict, unclosed think": (lambda s: parse_verdict(s + VERDICT, ITEM), lambda n: "<think>" * n, 2_000),
    "jobbench rubric reply, brace lines": (_rubric_judged, lambda n: "{\n" * n, 2_000),
    "jobbench rubric reply, unclosed nesting": (_rubric_judged, lambda n: '{"a": [\n' * n, 50),
    # the proxy's JSON string pattern behind a body that nests deep and fails to parse
    "proxy body, unclosed string": (_refused, lambda n: b"[" * 300 + b'"' + b'\\"' * n, 16_000),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(CASES))
def test_parser_time_grows_linearly(name: str) -> None:
    parse, make, n = CASES[name]
    ratio = growth(parse, make, n)
    assert ratio < BOUND, f"{name}: {FACTOR}x the input took {ratio:.0f}x the time (super-linear)"


def test_answers_keep_their_meaning_once_bounded() -> None:
    """What the bounds must not change: whitespace runs, tags in any case, the last pair wins."""
    assert parse_number("  1.5 \n\t million ") == (1.5e6, False)
    assert parse_number("1" + " " * 5000 + "x") is None
    assert numbers_in("a   1,200 \n\n %  and ( 3 )") == [(1200.0, True), (-3.0, False)]
    assert extract_tagged("<ANSWER> a </answer> <answer>b</Answer> <answer>c", "answer") == "b"
    assert extract_tagged("<answer>" * 50_000, "answer") is None
    assert match_answer("The total  was\n\n 1,470 million", "1.47 billion")


def _decoded_at_every_brace(text: str) -> list[tuple[int, Any]]:
    """What the judge used to find: ``raw_decode`` from every ``{`` (quadratic, kept here as the reference)."""
    found = []
    for i, ch in enumerate(text):
        if ch == "{":
            try:
                found.append((i, json.JSONDecoder().raw_decode(text, i)[0]))
            except ValueError:
                pass
    return found


def test_json_objects_are_what_the_decoder_finds_at_every_brace() -> None:
    """Valid JSON broken by random edits (unclosed strings, stray braces and quotes, escapes): the linear
    scan finds exactly the objects ``raw_decode`` finds starting at each brace, nested ones included."""
    rng = random.Random(7)

    def value(depth: int = 0) -> Any:
        r = rng.random()
        if depth > 3 or r < 0.3:
            return rng.choice([1, -2.5e3, "s", "{", '}"', True, None, "A\u00e9\\"])
        if r < 0.65:
            return {rng.choice(["a", "verdict", "B", "{"]): value(depth + 1) for _ in range(rng.randint(0, 3))}
        return [value(depth + 1) for _ in range(rng.randint(0, 3))]

    checked = 0
    for _ in range(1500):
        chars = list(rng.choice(["", "x ", "{"]).join(json.dumps(value(), indent=rng.choice([None, 1])) for _ in range(rng.randint(1, 3))))
        for _ in range(rng.randint(0, 3)):
            k = rng.randrange(len(chars) + 1)
            if rng.random() < 0.4 and k < len(chars):
                del chars[k]
            else:
                chars.insert(k, rng.choice('{}[]":,\\ \n'))
        text = "".join(chars)
        want = _decoded_at_every_brace(text)
        assert [(o.start, o.value) for o in json_objects(text)] == want, text
        checked += bool(want)
    assert checked > 900  # texts where the decoder finds an object: the comparison is not vacuous


def test_copies_are_known_by_content_and_deep_nesting_is_left_out() -> None:
    """The digest ignores key order and case (a judge re-typing a planted verdict is still caught); an
    object nested past ``MAX_DEPTH`` is not returned, the shallow objects inside it are."""
    one, two = [
        o for o in json_objects('{"Verdict": "YES", "n": [1, {"a": null}]} {"n": [1, {"a": null}], "verdict": "yes"}') if "n" in o.value
    ]
    assert one.digest == two.digest and two.value["verdict"] == "yes"
    assert len({o.digest for o in json_objects('{"v": 1} {"v": 1.0} {"v": "1"} {"v": [1]} {"w": 1}')}) == 5
    deep = '{"a": ' * (MAX_DEPTH + 5) + '{"verdict": "yes"}' + "}" * (MAX_DEPTH + 5)
    found = json_objects(deep)
    assert len(found) == MAX_DEPTH and found[-1].value == {"verdict": "yes"}
    assert parse_verdict(deep, ITEM).verdict == "yes"
