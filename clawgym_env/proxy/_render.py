"""Chat-template rendering that costs what is new, not the whole history.

A harness resends its whole history on every call, so rendering ``messages`` from scratch makes
prompt building O(history) per call (~6 ms at 40 turns on an idle core, most of it Jinja). For
the chat templates agents use, the text of a message depends on the message itself, its
neighbours, the first (system) message and the tools (which only the system turn shows), not on turns
further back. So once ``render(messages[:i])`` is known, ``render(messages[:j])`` is that text
plus the delta between two small renders without tools::

    head   = [messages[0], messages[i-1]]
    window = head + messages[i:j]
    render(messages[:j]) == render(messages[:i]) + render(window)[len(render(head)):]

The identity is not assumed blindly: a window whose head does not render as a prefix falls back
to a full render; the first few windows of each template that shift the head or drop tools in a process, and then every
``verify_every``-th windowed render, are checked against a full render; and a template caught
breaking it (one that numbers turns, or strips reasoning before the last user
query as Qwen3's does) is rendered in full from then on, for every session of this process.

Windows are rendered with the compiled template directly, through transformers' own steps of
``apply_chat_template`` (objects to dicts, None-valued keys dropped, plain JSON data, reasoning
aliases), each message converted once per call however many windows show it; full renders, the
reference every check compares with, still go through ``apply_chat_template``.

A prefix with the generation prompt is its plain render (usually known already) plus the text
``add_generation_prompt`` appends at the very end. Templates may make that text depend on the
system prompt (SmolLM3's reasoning flag) or on the last message's role (DeepSeek's after a tool
result), so it is learnt per (template, tools + system message, last role) from the first few real
renders and then checked every ``verify_every``-th; a template caught varying it otherwise renders
generation prompts for real from then on.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from typing import Any

__all__ = ["IncrementalRenderer"]

log = logging.getLogger(__name__)

_UNSAFE_TEMPLATES: set[str] = set()
"""Digests of chat templates seen breaking the window identity: rendered in full everywhere."""
_CHECKED: dict[str, int] = {}
"""Per template digest: how many windows with a shifted head or dropped tools were checked."""
_FIRST_CHECKS = 3
_GEN_SUFFIX: dict[tuple[str, bytes, str], str] = {}
"""Per (template digest, key of tools + system message, last role): the text the generation prompt appends,
as the real renders so far have all shown it."""
_GEN_CHECKED: dict[tuple[str, bytes, str], int] = {}
_GEN_VARIES: set[str] = set()
"""Digests of templates whose generation prompt is not one constant suffix: rendered for real."""


class IncrementalRenderer:
    """Renders prefixes of one session's message lists exactly, reusing the texts it rendered before.

    Args:
        tokenizer: an HF tokenizer with a ``chat_template``.
        incremental: False renders every prefix in full (the reference the benchmark compares with).
        verify_every: check one windowed render in this many against a full render (0: never).
        cache_size: how many rendered prefix texts to keep; a harness only builds on its last few calls.
    """

    def __init__(self, tokenizer: Any, *, incremental: bool = True, verify_every: int = 16, cache_size: int = 16) -> None:
        self.tokenizer = tokenizer
        self._digest = hashlib.sha256(str(tokenizer.chat_template).encode()).hexdigest()
        self.incremental = incremental
        self.verify_every = verify_every
        self._texts: OrderedDict[bytes, str] = OrderedDict()
        self._heads: OrderedDict[bytes, str] = OrderedDict()
        """keys[i] -> the window head [messages[0], messages[i-1]] rendered: one call's windows mostly start at one i."""
        self._cache_size = cache_size
        self.windowed = 0
        self.full = 0
        self.gen_derived = 0
        self._converted: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        """id(message) -> (message, what the template sees of it), for this call's windows (``new_call``)."""
        self._direct: tuple[Any, dict[str, Any]] | None = None
        """The compiled template and its special tokens: fixed for the tokenizer, so made once."""
        try:
            from transformers.utils.chat_template_utils import _compile_jinja_template, _plain_template_data

            template = self.tokenizer.get_chat_template(None, None)
            self._direct = (_compile_jinja_template(template), _plain_template_data({**self.tokenizer.special_tokens_map}))
        except Exception:  # noqa: BLE001 - another transformers, or no usable template: windows go through apply_chat_template
            self._direct = None

    def new_call(self) -> None:
        """Start a call: messages may have changed since the last one, so their conversions are made again."""
        self._converted.clear()

    def apply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], gen: bool) -> str:
        """The chat template applied to ``messages`` from scratch."""
        if not messages:
            return ""
        out = self.tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False, add_generation_prompt=gen)
        return out if isinstance(out, str) else str(out)

    def _apply_window(self, messages: list[dict[str, Any]], gen: bool) -> str:
        """``apply(messages, [], gen)``: the compiled template on transformers' conversion of each message, once a call."""
        if self._direct is None:
            return self.apply(messages, [], gen)
        from transformers.utils.chat_template_utils import (
            _alias_reasoning_fields,
            _message_objects_to_dicts,
            _plain_template_data,
        )

        chat = []
        for m in messages:
            hit = self._converted.get(id(m))
            if hit is None or hit[0] is not m:
                if not isinstance(m, dict):
                    raise TypeError(f"chat messages must be dicts, not {type(m).__name__}")
                kept = {k: v for k, v in _message_objects_to_dicts(m).items() if v is not None}
                hit = self._converted[id(m)] = (m, _alias_reasoning_fields([_plain_template_data(kept)])[0])
            chat.append(hit[1])
        template, special = self._direct
        return template.render(messages=chat, tools=None, documents=None, add_generation_prompt=gen, **special)

    def render(
        self, messages: list[dict[str, Any]], j: int, tools: list[dict[str, Any]], gen: bool, keys: list[bytes], start: int | None = None
    ) -> str:
        """``apply(messages[:j], tools, gen)``, from the longest prefix rendered before (up to ``start``).

        ``keys`` is the exact chain of ``HistoryKeys`` for (messages, tools); the result (without the generation prompt)
        is remembered for later calls. ``start`` (see ``base``) lets every render of one call window from one prefix,
        so they share one rendered head.
        """
        if gen and j and self.incremental and self._digest not in _GEN_VARIES:
            return self._with_generation_prompt(messages, j, tools, keys, start)
        return self._render(messages, j, tools, gen, keys, start)

    def _with_generation_prompt(
        self, messages: list[dict[str, Any]], j: int, tools: list[dict[str, Any]], keys: list[bytes], start: int | None
    ) -> str:
        plain = self._render(messages, j, tools, False, keys, start)
        what = (self._digest, keys[1], str(messages[j - 1].get("role")))
        suffix = _GEN_SUFFIX.get(what)
        checked = _GEN_CHECKED.get(what, 0)
        self.gen_derived += 1
        if suffix is not None and checked >= _FIRST_CHECKS and not (self.verify_every and self.gen_derived % self.verify_every == 0):
            return plain + suffix
        real = self._render(messages, j, tools, True, keys, start)
        if real.startswith(plain) and suffix in (None, real[len(plain) :]):
            _GEN_SUFFIX[what] = real[len(plain) :]
            _GEN_CHECKED[what] = checked + 1
        else:
            _GEN_VARIES.add(self._digest)
            log.warning("chat template %s… appends a varying generation prompt; it is rendered every time from now on", self._digest[:12])
        return real

    def _render(
        self, messages: list[dict[str, Any]], j: int, tools: list[dict[str, Any]], gen: bool, keys: list[bytes], start: int | None
    ) -> str:
        text = None if gen else self._texts.get(keys[j])
        if text is not None:
            self._texts.move_to_end(keys[j])
            return text
        if self.incremental and self._digest not in _UNSAFE_TEMPLATES:
            top = j - gen if start is None else min(start, j)  # a gen render from j itself would need a head of its own
            i = next((i for i in range(top, 1, -1) if keys[i] in self._texts), 0)
            if i >= 2:
                text = self._window(messages, i, j, tools, gen, self._texts[keys[i]], keys[i])
        if text is None:
            self.full += 1
            text = self.apply(messages[:j], tools, gen)
        if not gen:
            self.remember(keys[j], text)
        return text

    def base(self, keys: list[bytes], j: int) -> int:
        """The longest prefix of ``messages[:j]`` rendered before (0: none)."""
        return next((i for i in range(j, 1, -1) if keys[i] in self._texts), 0)

    def remember(self, key: bytes, text: str) -> None:
        """Record that the prefix ``key`` renders (without generation prompt) as ``text``."""
        self._texts[key] = text
        self._texts.move_to_end(key)
        while len(self._texts) > self._cache_size:
            self._texts.popitem(last=False)

    def _window(
        self, messages: list[dict[str, Any]], i: int, j: int, tools: list[dict[str, Any]], gen: bool, base: str, key: bytes
    ) -> str | None:
        # Tools are left out of both renders: templates list them in the system turn, which both
        # share, and rendering a harness's tool schemas (Claude Code's are ~40 kB) was most of the cost.
        head = [messages[0], messages[i - 1]]
        try:
            p = self._heads.get(key)
            if p is None:
                p = self._heads[key] = self._apply_window(head, False)
                while len(self._heads) > self._cache_size:
                    self._heads.popitem(last=False)
            r = self._apply_window(head + messages[i:j], gen)
        except Exception:  # noqa: BLE001 - e.g. a template that insists on role order: the full render decides
            return None
        if not r.startswith(p):
            return None
        text = base + r[len(p) :]
        self.windowed += 1
        if _CHECKED.get(self._digest, 0) < _FIRST_CHECKS and (i > 2 or tools):
            _CHECKED[self._digest] = _CHECKED.get(self._digest, 0) + 1  # shifted head or tools dropped
            check = True
        else:
            check = bool(self.verify_every) and self.windowed % self.verify_every == 0
        if check:
            full = self.apply(messages[:j], tools, gen)
            if full != text:
                _UNSAFE_TEMPLATES.add(self._digest)
                log.warning("chat template %s… renders context-dependently; prompts are rendered in full from now on", self._digest[:12])
                return full
        return text
