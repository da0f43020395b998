"""One request's decoding state in the HF backend's running batch: sampling, stops, streamed deltas.

Each row owns its sampling parameters, stop conditions and a private generator; tokens are drawn
by inverse CDF from one uniform per step, so a seeded request samples the same ids whichever
rows it shares the batch with. A streaming row hands the event loop a ``CompletionDelta`` per
step, holding back text that a stop string or an unfinished UTF-8 character may still change,
so the deltas' text joined is the completion's text.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from clawgym_env.capture.routing import RoutedExperts
from clawgym_env.proxy.backends.base import Completion, CompletionDelta, CompletionRequest

__all__ = ["Job", "Row"]


@dataclass
class Job:
    """A queued call: its request, and where its result (and, streaming, its deltas) go."""

    request: CompletionRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Completion]
    deltas: asyncio.Queue[CompletionDelta] | None = None
    """Set for a streaming call: each step's ids/logprobs/text arrive here before the result."""
    seed: int = 0
    version: int = field(default=0)


class Row:
    """One request's decoding state inside the running batch."""

    def __init__(
        self, job: Job, *, tokenizer: Any, eos: set[int], max_positions: int, raw_logprobs: bool, num_experts: int | None = None
    ) -> None:
        import torch

        self.job = job
        self.request = job.request
        self.prompt = list(job.request.prompt_ids or [])
        self.tokenizer, self.eos, self.raw_logprobs = tokenizer, eos, raw_logprobs
        self.budget = max(0, min(job.request.max_tokens, max_positions - len(self.prompt)))
        self.generator = torch.Generator().manual_seed(job.seed)
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.text_end: int | None = None
        self.finish = "length"
        self.done = self.budget == 0
        self.cached_tokens = 0
        self.slot = -1
        """Its slot in the running batch's cache (``_hf_batch.RunningBatch``)."""
        self.num_experts = num_experts
        self.routing: list[Any] = []  # MoE models: [rows, layers, top_k] expert chunks, one row per forwarded position
        self._sent = 0  # ids already handed out as deltas
        self._sent_text = 0  # characters of text already handed out
        self._hold = max((len(s) for s in job.request.stop if s), default=1) - 1

    def step(self, logits: Any) -> int | None:
        """Sample one token from this row's logits; None once the row is finished."""
        import torch

        if self.done:
            return None
        if self.job.future.cancelled():  # the harness hung up: stop decoding for it
            self.done, self.finish = True, "error"
            return None
        req = self.request
        raw = torch.log_softmax(logits, dim=-1)
        if req.temperature <= 0:
            token = int(torch.argmax(logits))
            scaled = raw
        else:
            scaled = torch.log_softmax(logits / req.temperature, dim=-1)
            probs = scaled.exp()
            if req.top_p < 1.0:
                sorted_p, order = torch.sort(probs, descending=True)
                drop = (sorted_p.cumsum(-1) - sorted_p) >= req.top_p
                drop[0] = False  # the most likely id always stays, even for top_p <= 0
                probs = probs.clone()
                probs[order[drop]] = 0.0
            cdf = probs.cumsum(-1)
            u = torch.rand(1, generator=self.generator, dtype=torch.float64).item() * float(cdf[-1])
            # side="right": the first id whose CDF exceeds u, so an id of probability 0 is never drawn
            token = min(int(torch.searchsorted(cdf, torch.tensor([u], dtype=cdf.dtype), right=True)), len(cdf) - 1)
            while probs[token] == 0.0 and token > 0:  # u rounded up to the total: step back to a real id
                token -= 1
        lp = raw[token] if self.raw_logprobs or req.temperature <= 0 else scaled[token]
        self.ids.append(token)
        self.logprobs.append(float(lp))
        self._check_finished(token)
        if self.job.deltas is not None and not self.done:
            self._send_delta(final=False)
        return token

    def add_routing(self, experts: Any) -> None:
        """Append the experts of the next forwarded positions (``[rows, layers, top_k]``)."""
        self.routing.append(experts)

    def routed(self) -> Any:
        """Every forwarded position's experts ``[rows, layers, top_k]`` (numpy), or None for a dense model."""
        import numpy as np

        if self.num_experts is None:
            return None
        if len(self.routing) > 1:
            self.routing = [np.concatenate(self.routing)]
        return self.routing[0] if self.routing else None

    def _decode(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=True)

    def _check_finished(self, token: int) -> None:
        if token in self.eos:
            self.done, self.finish = True, "stop"
        elif self.request.stop:
            text = self._decode()
            hits = [text.find(s) for s in self.request.stop if s and s in text]
            if hits:
                self.done, self.finish, self.text_end = True, "stop", min(hits)
        if not self.done and len(self.ids) >= self.budget:
            self.done, self.finish = True, "length"

    def _send_delta(self, *, final: bool, text: str | None = None) -> None:
        """Hand the loop the ids sampled since the last delta, with the text now certain."""
        text = self._decode() if text is None else text
        end = len(text)
        if not final:  # a stop string may still complete, a multi-byte character still finish
            end -= self._hold
            while end > self._sent_text and text[end - 1] == "\ufffd":
                end -= 1
        end = max(end, self._sent_text)
        if end == self._sent_text and self._sent == len(self.ids):
            return
        delta = CompletionDelta(self.ids[self._sent :], self.logprobs[self._sent :], text[self._sent_text : end])
        self._sent, self._sent_text = len(self.ids), end
        assert self.job.deltas is not None
        self.job.loop.call_soon_threadsafe(self.job.deltas.put_nowait, delta)

    def result(self) -> Completion:
        """The completion; a streaming row first sends its last delta (deltas' text joined is ``text``)."""
        text = self._decode()
        if self.text_end is not None:
            text = text[: self.text_end]
        if self.job.deltas is not None:
            self._send_delta(final=True, text=text)
        experts = self.routed()
        return Completion(
            routing=None if experts is None else RoutedExperts.from_array(experts, self.num_experts),  # type: ignore[arg-type]
            completion_ids=self.ids,
            logprobs=self.logprobs,
            text=text,
            finish_reason=self.finish,
            policy_version=self.job.version,
            usage={"prompt_tokens": len(self.prompt), "completion_tokens": len(self.ids), "cached_prompt_tokens": self.cached_tokens},
        )
