"""QueueBackend: a policy backend whose answers come from outside, one call at a time.

This is the inverted control behind the Gym envs: the harness drives itself, so each of its
model calls becomes a pending request on a queue; the env hands it to the agent as the
observation and resolves it with the agent's action.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend

__all__ = ["PendingCall", "QueueBackend"]


@dataclass
class PendingCall:
    """One model call waiting for the agent's answer."""

    request: CompletionRequest
    future: asyncio.Future[Completion]


class QueueBackend(PolicyBackend):
    """Puts each call on ``queue`` and waits for someone to resolve its future.

    With a ``tokenizer`` it is token-level: the proxy renders exact prompt ids and the answer
    may be completion ids with logprobs. Without one, answers are text (message level).
    """

    name = "queue"

    def __init__(self, tokenizer: Any | None = None, model_name: str = "policy") -> None:
        self._tokenizer = tokenizer
        self.TOKEN_LEVEL = tokenizer is not None  # type: ignore[misc]  # per-instance override
        self._model_name = model_name
        self.queue: asyncio.Queue[PendingCall] = asyncio.Queue()

    @property
    def tokenizer(self) -> Any | None:
        return self._tokenizer

    @property
    def model_name(self) -> str:
        return self._model_name

    async def handle(self, request: CompletionRequest) -> Completion:
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        await self.queue.put(PendingCall(request, future))
        return await future

    async def aclose(self) -> None:
        """Fail every call still waiting, so no harness request hangs."""
        while not self.queue.empty():
            pending = self.queue.get_nowait()
            if not pending.future.done():
                pending.future.cancel()
