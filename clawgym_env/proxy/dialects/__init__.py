"""One module per wire API; each exposes NAME, TOOL_ID_PREFIX, RESPONSE_ID_PREFIX, parse_request,
render_response, render_stream, stream_error and error_body."""

from __future__ import annotations

from types import ModuleType

from clawgym_env.proxy.dialects import anthropic, gemini, openai_chat, openai_responses

__all__ = ["DIALECTS", "anthropic", "gemini", "openai_chat", "openai_responses"]

DIALECTS: dict[str, ModuleType] = {m.NAME: m for m in (anthropic, gemini, openai_chat, openai_responses)}
