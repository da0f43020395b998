"""The model boundary: an HTTP server speaking each harness's API, serving a policy backend,
recording every call with exact token ids.

::

    from clawgym_env.proxy import ProxyServer, ScriptedBackend

    async with ProxyServer(port=0, uds_path=tmp / "proxy.sock") as server:   # TCP + unix socket
        session = server.open_session(backend, capture_path=tmp / "ep.jsonl", max_calls=50)
        # harness: ANTHROPIC_BASE_URL=server.url, OPENAI_BASE_URL=server.url + "/v1",
        #          key = session.api_key (or pin the session: base URL server.url + "/s/<session_id>")
        ...
        records = await server.close_session(session.session_id)   # list[CallRecord]

Endpoints: ``POST /v1/messages`` (+ ``?beta=true``), ``/v1/messages/count_tokens``,
``/v1/chat/completions``, ``/v1/responses``; ``GET /v1/models``, ``/health``. Streaming replies
are sent in one piece once the backend has answered (the event sequence is the full one the SDKs
expect). With a token-level backend the proxy renders prompts itself and splices sampled ids
(see ``_tito``); ``session.splice_hit_rate`` is the share of prompt tokens reused.
"""

from __future__ import annotations

from clawgym_env.proxy._output import parse_model_output
from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend
from clawgym_env.proxy.backends.scripted import ScriptedBackend
from clawgym_env.proxy.server import ProxyServer
from clawgym_env.proxy.session import ProxySession

__all__ = [
    "Completion",
    "CompletionRequest",
    "PolicyBackend",
    "ProxyServer",
    "ProxySession",
    "ScriptedBackend",
    "parse_model_output",
]
