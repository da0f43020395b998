"""Which part of a completion still being decoded is surely the start of the reply's content.

A streamed call forwards text to the harness while the policy decodes, but the reply's content
is only known at the end: ``parse_model_output`` strips it, takes tool calls and reasoning out.
So only text before the first markup tag (or before what may still become one) goes out live,
without leading or trailing whitespace, which makes every live piece a prefix of the final
content; everything after the first tag, and the tool calls, go out when the call ends. A prompt
that opened a reasoning block (Qwen3-style templates) streams nothing live: its text up to
``</think>`` is reasoning, not content.
"""

from __future__ import annotations

__all__ = ["LiveText"]

_TAGS = ("<think>", "</think>", "<tool_call>")


class LiveText:
    """Feed the decoded text deltas; ``feed`` returns the content text newly certain (may be '')."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.text = ""
        self.sent = ""
        self._frozen = False  # a tag was seen: nothing after it goes out live

    def feed(self, delta: str) -> str:
        if not self.enabled or self._frozen or not delta:
            return ""
        self.text += delta
        cut = min((i for i in (self.text.find(t) for t in _TAGS) if i >= 0), default=-1)
        if cut >= 0:
            self._frozen = True
            region = self.text[:cut]
        else:
            region = self.text
            lt = region.rfind("<")
            if lt >= 0 and any(t.startswith(region[lt:]) for t in _TAGS):
                region = region[:lt]  # may still become a tag
        safe = region.strip()
        new = safe[len(self.sent) :]
        self.sent = safe if len(safe) > len(self.sent) else self.sent
        return new


def opens_reasoning(prompt_tail: str) -> bool:
    """True when the rendered prompt ends inside an open ``<think>`` block."""
    return prompt_tail.rfind("<think>") > prompt_tail.rfind("</think>")
