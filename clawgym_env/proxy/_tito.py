"""Token-in-token-out prompt building for one episode (docs/design.md, "Exact tokens").

The proxy owns the prompt ids. Two indexes per episode:

- anchors: normalised message-list prefix -> exact ids (and the text they stand for). Every
  prompt we build is anchored, and so is prompt + sampled completion for each turn we answer.
  The longest anchored prefix of a new request is reused verbatim.
- turns: normalised assistant turn -> the exact sampled completion ids (+ the template's closing
  text). An assistant turn we sampled that shows up *after* the reused prefix is spliced in by
  id, never re-tokenized, even when the harness changed what came before it (OpenClaw appends a
  volatile user message to each request and drops it from the next).

Everything between spliced pieces is rendered with the chat template (render prefix and full,
take the textual delta) and tokenized. When a harness replays history unchanged, call N+1's
prompt starts with call N's prompt + completion ids, byte for byte.
"""

from __future__ import annotations

import weakref
from array import array
from collections import OrderedDict
from typing import Any

from clawgym_env.capture.delta import PromptHint
from clawgym_env.errors import ProxyError
from clawgym_env.proxy._neutral import HistoryKeys, message_key
from clawgym_env.proxy._render import IncrementalRenderer

__all__ = ["PromptBuilder"]

_SHARED_SIZE = 8
_SHORT = 64
"""Texts up to this long are encoded once per session (``PromptBuilder._encode``)."""
_SHORT_KEPT = 256
_SHARED: weakref.WeakKeyDictionary[Any, OrderedDict[bytes, tuple[array[int], str]]] = weakref.WeakKeyDictionary()
"""Per tokenizer: the exact ids of first turns (system + tools) other episodes of this process built."""


class PromptBuilder:
    """Builds exact prompt ids for one session's calls and remembers what it sampled."""

    def __init__(self, tokenizer: Any, *, incremental: bool = True) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise ProxyError(
                "the backend's tokenizer has no chat_template; set tokenizer.chat_template "
                "(or save one in tokenizer_config.json) so the proxy can render prompts"
            )
        self.tokenizer = tokenizer
        self.eos_text: str = tokenizer.eos_token or ""
        self.eos_id: int | None = tokenizer.eos_token_id
        self._anchors: dict[bytes, tuple[array[int], str]] = {}  # compact: 4 bytes per id
        self._turns: dict[bytes, list[int]] = {}
        self.prompt_tokens = 0
        self.reused_tokens = 0
        self.spliced_turns = 0
        self.shared_hits = 0
        self._last_gen: tuple[bytes, str, int | None] = (b"", "", None)
        self._last_prompt: tuple[list[int], array[int]] = ([], array("i"))
        self.last_hint: PromptHint | None = None
        """For the prompt ``build`` returned last: the earlier prompt list its first ids are (the capture's delta)."""
        self.renderer = IncrementalRenderer(tokenizer, incremental=incremental)
        self._keys = HistoryKeys()
        self._short: dict[str, list[int]] = {}
        self._shared = _SHARED.setdefault(tokenizer, OrderedDict())
        from transformers import PreTrainedTokenizerFast  # here: importing the proxy must not import transformers

        # A fast tokenizer's Rust backend gives the ids its __call__ gives (that call sets
        # encode_special_tokens from split_special_tokens, False unless asked), without BatchEncoding's cost.
        fast = isinstance(tokenizer, PreTrainedTokenizerFast) and not tokenizer.split_special_tokens
        self._backend = tokenizer.backend_tokenizer if fast else None

    def _encode(self, text: str) -> list[int]:
        if not text:
            return []
        if len(text) <= _SHORT:  # generation prompts, turn closings: the same few texts on every call
            ids = self._short.get(text)
            if ids is None:
                if len(self._short) >= _SHORT_KEPT:
                    self._short.clear()
                ids = self._short[text] = self._encode_text(text)
            return ids
        return self._encode_text(text)

    def _encode_text(self, text: str) -> list[int]:
        if self._backend is not None:
            return self._backend.encode(text, add_special_tokens=False).ids
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def build(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[list[int], int]:
        """Prompt ids for ``messages`` (generation prompt appended) and how many ids were reused."""
        self.renderer.new_call()
        keys, ek = self._keys(messages, tools)
        n = len(messages)
        start = self.renderer.base(ek, n) or None

        def render(msgs: list[dict[str, Any]], j: int, tools: list[dict[str, Any]], gen: bool, ek: list[bytes]) -> str:
            return self.renderer.render(msgs, j, tools, gen, ek, start)

        full = render(messages, n, tools, False, ek)
        k = next((j for j in range(n, 0, -1) if keys[j] in self._anchors), 0)
        ids: array[int] = array("i")  # ids stay compact while they are built; one list at the end
        pos_text = ""
        reused = 0  # a first turn shared from another episode is not a splice of this one
        copied = 0  # ids[:copied] came from an anchor
        if k:
            anchor_ids, anchor_text = self._anchors[keys[k]]
            if not full.startswith(anchor_text):  # same turns, different rendering (e.g. reasoning dropped)
                anchor_text = render(messages, k, tools, False, ek)
            if full.startswith(anchor_text):
                ids, pos_text, reused = anchor_ids[:], anchor_text, len(anchor_ids)
                copied = reused
            else:
                k = 0
        elif n >= 2:
            # A first call: anchor its first turn (system + tools) on its own. Every episode of a
            # harness shares it, so its ids come from another episode of this process when one built
            # it; the cut sits before the next turn's start token, where tokenizers split anyway.
            first = render(messages, 1, tools, False, ek)
            if full.startswith(first):
                anchor = self._shared.get(keys[1])
                if anchor is not None and anchor[1] == first:
                    self.shared_hits += 1
                else:
                    anchor = (array("i", self._encode(first)), first)
                    self._shared[keys[1]] = anchor
                    while len(self._shared) > _SHARED_SIZE:
                        self._shared.popitem(last=False)
                ids, pos_text, k = anchor[0][:], first, 1
                copied = len(ids)
                self._anchors[keys[1]] = anchor
        pos = k
        for i in range(k, n):
            m = messages[i]
            turn = self._turns.get(message_key(m)) if m.get("role") == "assistant" else None
            if turn is None:
                continue
            head = render(messages, i, tools, True, ek)
            tail = render(messages, i + 1, tools, False, ek)
            if not (head.startswith(pos_text) and full.startswith(head) and full.startswith(tail)):
                continue  # this template does not render the turn where the generation prompt ends
            ids.extend(self._encode(head[len(pos_text) :]))
            ids.extend(turn)
            reused += len(turn)
            self.spliced_turns += 1
            pos_text, pos = tail, i + 1
            self._anchors[keys[i + 1]] = (ids[:], tail)
        if n - 1 > pos and messages[-1].get("role") == "user":
            # Anchor the history without its last user message too: OpenClaw replaces that message
            # (volatile context) on every call, so the next call shares exactly this prefix.
            mid = render(messages, n - 1, tools, False, ek)
            if mid.startswith(pos_text) and full.startswith(mid):
                ids.extend(self._encode(mid[len(pos_text) :]))
                pos_text = mid
                self._anchors[keys[n - 1]] = (ids[:], mid)
        ids.extend(self._encode(full[len(pos_text) :]))
        self._anchors[keys[n]] = (ids[:], full)
        with_gen = render(messages, n, tools, True, ek)
        self._last_gen = (keys[n], with_gen, start)  # remember() of this call needs them again
        ids.extend(self._encode(with_gen[len(full) :] if with_gen.startswith(full) else ""))
        prompt = self._as_list(ids, copied)
        self._last_prompt = (prompt, ids)
        self.prompt_tokens += len(prompt)
        self.reused_tokens += reused
        return prompt, reused

    def _as_list(self, ids: array[int], copied: int) -> list[int]:
        """``ids.tolist()``, its start taken from the last prompt's list where ids start as it does (checked: the
        first ``copied`` ids came from an anchor, mostly a prefix of the last prompt). ~20k fresh ints cost ~5x a
        list slice of the old ones."""
        last, last_ids = self._last_prompt
        n = min(copied, len(last_ids))
        if n and last_ids[:n] == ids[:n]:
            out = last[:n]
            out += ids[n:].tolist()
            self.last_hint = PromptHint(last, n)
            return out
        self.last_hint = None
        return ids.tolist()

    def remember(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        prompt_ids: list[int],
        completion_ids: list[int],
        assistant: dict[str, Any],
    ) -> None:
        """Index ``messages + [assistant]`` as prompt + sampled completion (+ the template's closing text)."""
        self.renderer.new_call()
        full = messages + [assistant]
        keys, ek = self._keys(full, tools)
        last_key, with_gen, start = self._last_gen
        if last_key != keys[-2]:  # another call was built in between
            start = None
            with_gen = self.renderer.render(messages, len(messages), tools, True, ek)
        try:
            rendered = self.renderer.render(full, len(full), tools, False, ek, start)
        except Exception:  # noqa: BLE001 - a template that cannot render this turn: nothing to index
            return
        if not rendered.startswith(with_gen):
            return
        span = rendered[len(with_gen) :]
        cut = span.rfind(self.eos_text) if self.eos_text else -1
        closing = span[cut + len(self.eos_text) :] if cut >= 0 else ""
        ended = bool(completion_ids) and completion_ids[-1] == self.eos_id
        turn = list(completion_ids) + self._encode(closing if ended or cut < 0 else self.eos_text + closing)
        self._turns[message_key(assistant)] = turn
        built, built_ids = self._last_prompt
        indexed = built_ids[:] if built is prompt_ids else array("i", prompt_ids)
        indexed.extend(turn)
        self._anchors[keys[-1]] = (indexed, rendered)

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens spliced from earlier calls in this episode."""
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
