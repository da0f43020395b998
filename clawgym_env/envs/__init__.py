"""Gymnasium environments: one real harness episode per env episode, with inverted control.

    import gymnasium as gym, clawgym_env
    env = gym.make("ClawGym/Custom-v0", suite="clawgym-original")
    obs, info = env.reset(options={"task": "smoke-hello-file-p0"})

Names are imported lazily: ``import clawgym_env`` registers the ids without loading the proxy
or sandbox code.
"""

from __future__ import annotations

import importlib
from typing import Any

from clawgym_env.envs.registration import ENV_IDS, register_envs, register_harness

__all__ = ["ENV_IDS", "ClawGymEnv", "PendingCall", "QueueBackend", "UnicodeText", "register_envs", "register_harness", "token_ids_space"]

_LAZY = {
    "ClawGymEnv": "clawgym_env.envs.harness_env",
    "PendingCall": "clawgym_env.envs.queue_backend",
    "QueueBackend": "clawgym_env.envs.queue_backend",
    "UnicodeText": "clawgym_env.envs.spaces",
    "token_ids_space": "clawgym_env.envs.spaces",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'clawgym_env.envs' has no attribute {name!r}")
