"""The model boundary: an HTTP server speaking each harness's API, serving a policy backend,
recording every call with exact token ids."""

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
