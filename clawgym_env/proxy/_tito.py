"""Token-in-token-out prompt building for one episode (DESIGN.md, "Token-in-token-out, precisely").

The proxy owns the prompt ids. Each call's neutral message list is matched against an index
of prefixes already turned into ids in this episode: prompts we rendered, and prompt +
*sampled* completion ids for assistant turns we produced. The longest hit is reused verbatim;
only the remaining messages are rendered with the chat template (render prefix and full,
take the textual delta) and tokenized. So when a harness replays history unchanged, call
N+1's prompt starts with call N's prompt + completion ids, byte for byte.
"""

from __future__ import annotations

from typing import Any

from clawgym_env.errors import ProxyError
from clawgym_env.proxy._neutral import prefix_keys

__all__ = ["PromptBuilder"]


class PromptBuilder:
    """Per-session prefix index from normalised message-list prefixes to exact token ids."""

    def __init__(self, tokenizer: Any) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise ProxyError("the backend's tokenizer has no chat_template; set tokenizer.chat_template "
                             "(or save one in tokenizer_config.json) so the proxy can render prompts")
        self.tokenizer = tokenizer
        self.eos_text: str = tokenizer.eos_token or ""
        self.eos_id: int | None = tokenizer.eos_token_id
        self._anchors: dict[bytes, list[int]] = {}
        self.prompt_tokens = 0
        self.reused_tokens = 0

    def _render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], gen: bool) -> str:
        if not messages:
            return ""
        out = self.tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=gen
        )
        return out if isinstance(out, str) else str(out)

    def _encode(self, text: str) -> list[int]:
        if not text:
            return []
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def build(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[list[int], int]:
        """Prompt ids for ``messages`` (generation prompt appended) and how many were reused."""
        keys = prefix_keys(messages, tools)
        k = next((j for j in range(len(messages), 0, -1) if keys[j] in self._anchors), 0)
        full = self._render(messages, tools, gen=False)
        prefix: list[int] = []
        delta = full
        if k:
            pre_text = self._render(messages[:k], tools, gen=False)
            if full.startswith(pre_text):
                prefix = self._anchors[keys[k]]
                delta = full[len(pre_text) :]
        body = prefix + self._encode(delta)
        self._anchors[keys[-1]] = body
        with_gen = self._render(messages, tools, gen=True)
        gen_text = with_gen[len(full) :] if with_gen.startswith(full) else ""
        prompt = body + self._encode(gen_text)
        self.prompt_tokens += len(prompt)
        self.reused_tokens += len(prefix)
        return prompt, len(prefix)

    def remember(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        prompt_ids: list[int],
        completion_ids: list[int],
        assistant: dict[str, Any],
    ) -> None:
        """Index ``messages + [assistant]`` as prompt + sampled completion (+ the template's closing text)."""
        full = messages + [assistant]
        with_gen = self._render(messages, tools, gen=True)
        try:
            rendered = self._render(full, tools, gen=False)
        except Exception:  # a template that cannot render this turn: nothing to index
            return
        tail = rendered[len(with_gen) :] if rendered.startswith(with_gen) else ""
        closing = ""
        if self.eos_text and self.eos_text in tail:
            closing = tail[tail.rindex(self.eos_text) + len(self.eos_text) :]
        ended = bool(completion_ids) and completion_ids[-1] == self.eos_id
        extra = closing if ended else (self.eos_text + closing if self.eos_text in tail else "")
        self._anchors[prefix_keys(full, tools)[-1]] = prompt_ids + completion_ids + self._encode(extra)

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens spliced from earlier calls in this episode."""
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
