"""One tools-capable ChatML chat template (Qwen3 / Hermes style) for the models we build or convert.

Why our own: SmolLM2's template has no tools, and the tiny test model has none at all. Both get this
one, so the proxy renders and parses the same shapes everywhere:

- ``tools`` are listed as JSON lines inside ``<tools></tools>`` in the system turn;
- an assistant ``tool_calls`` entry becomes ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``;
- ``role: "tool"`` messages become ``<tool_response>`` blocks inside one user turn (consecutive ones grouped);
- ``reasoning_content`` becomes ``<think>\\n...\\n</think>\\n\\n`` before the content, and is never stripped
  from past turns, so rendering a longer history only appends tokens (prefix-stable, which TITO relies on);
- ``content`` may be a string or a list of ``{"type": "text", "text": ...}`` parts.
"""

from __future__ import annotations

__all__ = ["SPECIAL_TOKENS", "TOOLS_CHATML_TEMPLATE", "TOOL_TOKENS"]

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
"""Control tokens: skipped when decoding with ``skip_special_tokens=True``."""

TOOL_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
"""Added as single tokens but not special: they stay in decoded text so the proxy can parse them."""

TOOLS_CHATML_TEMPLATE = (
    "{%- macro render_content(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- elif content is none -%}"
    "{%- else -%}{%- for part in content -%}"
    "{%- if part is string -%}{{- part -}}"
    "{%- elif part.type == 'text' -%}{{- part.text -}}"
    "{%- endif -%}{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages and messages[0].role == 'system' -%}"
    "{{- render_content(messages[0].content) + '\\n\\n' -}}"
    "{%- endif -%}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' -}}{{- tool | tojson -}}{%- endfor -%}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, '
    '"arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n\' -}}'
    "{%- elif messages and messages[0].role == 'system' -%}"
    "{{- '<|im_start|>system\\n' + render_content(messages[0].content) + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'system' and loop.first -%}"
    "{%- elif message.role == 'tool' -%}"
    "{%- if loop.first or loop.previtem.role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + render_content(message.content) + '\\n</tool_response>' -}}"
    "{%- if loop.last or loop.nextitem.role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- elif message.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if message.reasoning_content -%}"
    "{{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{{- render_content(message.content) -}}"
    "{%- for tool_call in (message.tool_calls or []) -%}"
    "{%- set call = tool_call.function if tool_call.function is defined else tool_call -%}"
    "{%- if loop.first and render_content(message.content) -%}{{- '\\n' -}}{%- endif -%}"
    "{%- if not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    '{{- \'<tool_call>\\n{"name": "\' + call.name + \'", "arguments": \' -}}'
    "{%- if call.arguments is string -%}{{- call.arguments -}}"
    "{%- else -%}{{- call.arguments | tojson -}}{%- endif -%}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + render_content(message.content) + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
"""Jinja source; HF ``apply_chat_template`` passes ``messages``, ``tools`` and ``add_generation_prompt``."""
