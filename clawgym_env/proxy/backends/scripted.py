"""ScriptedBackend: replies from a list, a callable or a YAML/JSON script (our MockTransport).

A reply is a string (plain text, may contain ``<think>``/``<tool_call>`` markup), a dict
``{"text"?, "reasoning"?, "tool_calls"?: [{"name", "arguments"}], "finish_reason"?}``, or a
ready ``Completion``. Script files look like::

    rules:                       # tried first, in order; first match answers
      - match: "(?i)title"       # regex searched in the last user/tool message (or `scope: system|any`)
        reply: {text: "Untitled"}
    replies:                     # then by position, one per call not answered by a rule
      - {tool_calls: [{name: Write, arguments: {file_path: a.txt, content: hi}}]}
      - "done"
    default: "done"              # after the list runs out (omit: an error, the script is exhausted)

With a tokenizer the backend becomes token-level: the proxy renders the prompt, and the reply
is turned into Hermes markup and tokenized (``token_source="tokenized"``, logprobs 0.0).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

from clawgym_env.errors import ConfigError, PolicyBackendError
from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend

__all__ = ["ScriptedBackend"]

Reply = str | dict[str, Any] | Completion
ReplyFn = Callable[[CompletionRequest], Any]


def _last_text(request: CompletionRequest, on: str) -> str:
    msgs = request.messages
    if on == "any":
        return "\n".join(str(m.get("content") or "") for m in msgs)
    if on == "system":
        return "\n".join(str(m.get("content") or "") for m in msgs if m.get("role") == "system")
    for m in reversed(msgs):
        if m.get("role") in ("user", "tool"):
            return str(m.get("content") or "")
    return ""


class ScriptedBackend(PolicyBackend):
    """Deterministic policy for tests and demos: by call index, by matching the request, or by a function."""

    WEIGHT_UPDATE = "fixed"
    name = "scripted"

    def __init__(
        self,
        replies: list[Reply] | ReplyFn | Path | str | None = None,
        *,
        rules: list[dict[str, Any]] | None = None,
        default: Reply | None = None,
        tokenizer: Any | None = None,
    ) -> None:
        self._fn: ReplyFn | None = None
        self._replies: list[Reply] = []
        self._rules: list[tuple[re.Pattern[str], str, Reply]] = []
        self._default = default
        if callable(replies):
            self._fn = replies
        elif isinstance(replies, (Path, str)):
            self._load(Path(replies))
        elif replies is not None:
            self._replies = list(replies)
        for r in rules or ():
            self._add_rule(r, "rules")
        self._pos = 0
        self._tokenizer = tokenizer
        self.TOKEN_LEVEL = tokenizer is not None  # type: ignore[misc]  # per instance: ids only with a tokenizer

    @classmethod
    def from_file(cls, path: Path | str, *, tokenizer: Any | None = None) -> ScriptedBackend:
        return cls(Path(path), tokenizer=tokenizer)

    def _load(self, path: Path) -> None:
        if not path.is_file():
            raise ConfigError(f"scripted backend: script file {path} does not exist")
        try:
            data = yaml.safe_load(path.read_text()) if path.suffix in (".yaml", ".yml") else orjson.loads(path.read_bytes())
        except (yaml.YAMLError, orjson.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: not valid YAML/JSON ({exc})") from exc
        if isinstance(data, list):
            data = {"replies": data}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping with replies/rules/default or a list of replies")
        unknown = set(data) - {"replies", "rules", "default"}
        if unknown:
            raise ConfigError(f"{path}: unknown keys {sorted(unknown)}; allowed: replies, rules, default")
        self._replies = list(data.get("replies") or [])
        for r in data.get("rules") or ():
            self._add_rule(r, str(path))
        if "default" in data:
            self._default = data["default"]

    def _add_rule(self, rule: dict[str, Any], where: str) -> None:
        if not isinstance(rule, dict) or "match" not in rule or "reply" not in rule:
            raise ConfigError(f"{where}: each rule needs `match` (regex) and `reply`")
        unknown = set(rule) - {"match", "reply", "scope"}
        if unknown:
            raise ConfigError(f"{where}: rule keys {sorted(map(str, unknown))} are unknown; use match, reply, scope")
        on = rule.get("scope", "last")
        if on not in ("last", "system", "any"):
            raise ConfigError(f"{where}: rule `scope` must be last, system or any, not {on!r}")
        self._rules.append((re.compile(rule["match"]), on, rule["reply"]))

    @property
    def tokenizer(self) -> Any | None:
        return self._tokenizer

    async def handle(self, request: CompletionRequest) -> Completion:
        reply = await self._pick(request)
        return self._to_completion(reply)

    async def _pick(self, request: CompletionRequest) -> Reply:
        if self._fn is not None:
            out = self._fn(request)
            return await out if inspect.isawaitable(out) else out
        for pattern, on, reply in self._rules:
            if pattern.search(_last_text(request, on)):
                return reply
        if self._pos < len(self._replies):
            self._pos += 1
            return self._replies[self._pos - 1]
        if self._default is not None:
            return self._default
        raise PolicyBackendError(
            f"scripted backend: script exhausted after {len(self._replies)} replies (call {request.call_index}); add replies or a `default`"
        )

    def _to_completion(self, reply: Reply) -> Completion:
        if isinstance(reply, Completion):
            return reply
        if isinstance(reply, str):
            if self._tokenizer is None:  # raw model text: the proxy parses any markup in it
                return Completion(completion_ids=None, logprobs=None, text=reply, token_source="none")
            reply = {"text": reply}
        if not isinstance(reply, dict):
            raise PolicyBackendError(f"scripted backend: a reply must be str, dict or Completion, not {type(reply).__name__}")
        calls = [{"name": c["name"], "arguments": c.get("arguments") or {}} for c in reply.get("tool_calls") or ()]
        finish = reply.get("finish_reason", "stop")
        if self._tokenizer is None:
            structured = {"content": reply.get("text", ""), "reasoning_content": reply.get("reasoning", ""), "tool_calls": calls}
            return Completion(
                completion_ids=None,
                logprobs=None,
                text=reply.get("text", ""),
                finish_reason=finish,
                structured=structured,
                token_source="none",
            )
        text = self.markup(reply.get("text", ""), reply.get("reasoning", ""), calls)
        ids = list(self._tokenizer(text, add_special_tokens=False)["input_ids"])
        if self._tokenizer.eos_token_id is not None and finish == "stop":
            ids.append(self._tokenizer.eos_token_id)
        return Completion(completion_ids=ids, logprobs=[0.0] * len(ids), text=text, finish_reason=finish, token_source="tokenized")

    @staticmethod
    def markup(text: str, reasoning: str, calls: list[dict[str, Any]]) -> str:
        """Hermes/Qwen-style completion text for a structured reply."""
        parts = [f"<think>\n{reasoning}\n</think>\n\n"] if reasoning else []
        if text:
            parts.append(text)
        for c in calls:
            body = orjson.dumps({"name": c["name"], "arguments": c["arguments"]}).decode()
            parts.append(("\n" if parts else "") + f"<tool_call>\n{body}\n</tool_call>")
        return "".join(parts)
