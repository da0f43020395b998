"""In-process transformers policy: exact prompt ids in, sampled ids + logprobs out, continuously batched.

Concurrent calls share one running batch (``_hf_batch``): a call joins it as soon as it is
prefilled and leaves it at its own stop, between any two decode steps, each row with its own
sampling parameters, stop conditions and random generator (``_hf_row``). This backend is for
CPU tests, small models and single-GPU runs; use vLLM for throughput.

Logprobs: each returned logprob is ``log_softmax(logits)[id]`` of the *raw* model distribution
(temperature 1, no top-p), whatever temperature/top-p sampled the id. That is the same quantity
a trainer recomputes with a forward pass of the policy, and what vLLM returns by default
(``logprobs_mode="raw_logprobs"``), so captures from both backends mean the same thing.
``logprobs_mode="tempered"`` returns ``log_softmax(logits / temperature)[id]`` instead (what
TRL recomputes when its ``temperature`` is set), still without the top-p mask.

Prefix reuse: each prompt is prefilled on its own (exact; no padding) after the longest prefix
found in a store shared by all sessions (``_hf_prefix.PrefixCache``: keys/values per block of
``prefix_block_tokens``, LRU-bounded to ``prefix_cache_mb``). A prompt's blocks are stored right
after its prefill (so the next episode of the same harness, or a call admitted just after,
skips the shared system prompt and tools), its completion's when it ends (so the session's next
call, which extends this one, prefills only the new turn). ``update_weights`` empties the store.
``usage["cached_prompt_tokens"]`` says how many prompt tokens were reused.

Mixture-of-experts models: hooks on the routers record the experts every forwarded token was routed
to (``_hf_routing``), prompt tokens reused from the prefix store with the rows stored beside them,
and ``Completion.routing`` returns them (``CallRecord.routing``: what routing replay trains with).

Stops: ``completion_ids`` hold every sampled id, the EOS id included (it is trained on); on a
stop string, the ids end with the token that completed it and ``text`` is cut before it.
A call whose caller was cancelled (the harness hung up) stops decoding at the next step.

Streaming: ``stream`` yields a ``CompletionDelta`` per decode step, then the ``Completion``; the
ids, logprobs and text are those ``handle`` returns for the same request.

Randomness: a request's ``seed`` (or, without one, a seed derived from the backend's ``seed``,
the session id and the call index, so concurrent episodes sample the same whatever order their
calls arrive in) seeds a generator private to that row, and tokens are drawn by inverse CDF from
one uniform per step, so a seeded request samples the same ids alone or in any batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from clawgym_env.errors import ConfigError, PolicyBackendError, PromptTooLong
from clawgym_env.proxy.backends._hf_batch import Batcher
from clawgym_env.proxy.backends._hf_prefix import PrefixCache
from clawgym_env.proxy.backends._hf_routing import RoutingTap
from clawgym_env.proxy.backends._hf_row import Job, Row
from clawgym_env.proxy.backends.base import Completion, CompletionDelta, CompletionRequest, StreamingBackend

__all__ = ["HFBackend", "call_seed"]

LogprobsMode = Literal["raw", "tempered"]


class HFBackend(StreamingBackend):
    """A Hugging Face causal LM served in this process (CPU or GPU)."""

    TOKEN_LEVEL = True
    name = "hf"

    def __init__(
        self,
        model_path: str | Path,
        *,
        device: str = "cpu",
        dtype: str | Any | None = None,
        max_batch: int = 8,
        seed: int | None = None,
        logprobs_mode: LogprobsMode = "raw",
        batch_wait_s: float = 0.005,
        eos_token_ids: list[int] | None = None,
        num_threads: int | None = None,
        prefix_cache_mb: float = 1024.0,
        prefix_block_tokens: int = 32,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if max_batch < 1:
            raise ConfigError(f"HFBackend: max_batch must be >= 1, got {max_batch}")
        if logprobs_mode not in ("raw", "tempered"):
            raise ConfigError(f"HFBackend: logprobs_mode must be 'raw' or 'tempered', got {logprobs_mode!r}")
        path = Path(model_path)
        if not (path / "config.json").exists():
            raise ConfigError(f"{path}: not a Hugging Face model folder (no config.json); pass hf:PATH to one")
        if num_threads is None and device == "cpu":
            # Sandboxes, harnesses and verifiers share the CPU with us; OpenMP threads that spin-wait on
            # busy cores made SmolLM2 13x slower on 2 cores (1.5 s/token with 2 threads, 0.12 s with 1).
            num_threads = max(1, (os.cpu_count() or 2) // 2)
        if num_threads:
            torch.set_num_threads(num_threads)  # process-wide
        torch_dtype = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
        if dtype is not None and not isinstance(torch_dtype, torch.dtype):
            raise ConfigError(f"HFBackend: dtype {dtype!r} is not a torch dtype (use float32, bfloat16 or float16)")
        self.model_path = path
        self._tokenizer = AutoTokenizer.from_pretrained(path)
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype or "auto")
        self.model = model.to(device).eval()
        self.device = device
        self.max_batch = max_batch
        self.batch_wait_s = batch_wait_s
        self.logprobs_mode: LogprobsMode = logprobs_mode
        self.seed = seed
        self.policy_version = 0
        self.eos_token_ids = set(eos_token_ids if eos_token_ids is not None else self._default_eos())
        self._vocab = self.model.get_output_embeddings().weight.shape[0]
        self.max_positions = int(getattr(self.model.config, "max_position_embeddings", 1 << 30))
        # transformers >= 5.2x renamed the KV-cache argument and output field to ``cache``
        params = inspect.signature(self.model.forward).parameters
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self._closed = False
        self.prefix = PrefixCache(int(prefix_cache_mb * 2**20), prefix_block_tokens)
        self.routing = RoutingTap.attach(self.model)
        """Hooks recording the routed experts of a mixture-of-experts model; None for a dense one."""
        self._batcher = Batcher(self)
        self.stats = {"calls": 0, "steps": 0, "joins": 0, "max_rows": 0, "prefix_hit_tokens": 0}
        """Counters: calls, decode steps, calls that joined rows already decoding, the largest batch, reused tokens."""

    # -- public surface ---------------------------------------------------------------------

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def model_name(self) -> str:
        return self.model_path.name

    async def handle(self, request: CompletionRequest) -> Completion:
        """Queue the request; it joins the running batch at the next step. Returns its completion."""
        return await self._submit(request, streaming=False).future

    async def stream(self, request: CompletionRequest) -> AsyncIterator[CompletionDelta | Completion]:
        """The request's deltas as they are decoded, then its completion (the same ``handle`` returns)."""
        job = self._submit(request, streaming=True)
        assert job.deltas is not None
        try:
            while True:
                item = await job.deltas.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, Completion):
                    return
        finally:
            job.future.cancel()  # abandoned early (or done: a no-op): the row stops decoding

    def _submit(self, request: CompletionRequest, *, streaming: bool) -> Job:
        if self._closed:
            raise PolicyBackendError("HFBackend is closed; create a new backend")
        self._check_prompt(request.prompt_ids)
        loop = asyncio.get_running_loop()
        job = Job(request, loop, loop.create_future(), asyncio.Queue() if streaming else None, self._next_seed(request))
        self._batcher.submit(job)
        return job

    def update_weights(self, weights: Any, version: int, *, strict: bool = True) -> None:
        """Load new weights (a state dict or a module) once the running rows finish; later calls carry ``version``."""
        state = weights.state_dict() if hasattr(weights, "state_dict") else weights

        def load() -> None:
            try:
                self.model.load_state_dict(state, strict=strict)
                self.prefix.clear()  # cached keys/values belong to the old weights
            except RuntimeError as exc:
                raise PolicyBackendError(f"update_weights: state dict does not fit {self.model_path}: {exc}") from exc
            self.policy_version = version

        self._batcher.swap_weights(load)

    async def aclose(self) -> None:
        """Stop the worker once the running rows finish; queued calls fail with PolicyBackendError. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._batcher.close)

    # -- internals (the worker thread calls ``prefill``) -----------------------------------------------------------------------------

    def _default_eos(self) -> list[int]:
        ids: list[int] = []
        gen = getattr(self.model, "generation_config", None)
        eos = getattr(gen, "eos_token_id", None)
        ids.extend(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self._tokenizer.eos_token_id is not None:
            ids.append(self._tokenizer.eos_token_id)
        return ids

    def _check_prompt(self, ids: list[int] | None) -> None:
        if not ids:
            raise PolicyBackendError("HFBackend is token-level: CompletionRequest.prompt_ids must be a non-empty list")
        bad = [i for i in ids if not 0 <= i < self._vocab]
        if bad:
            raise PolicyBackendError(f"prompt_ids hold ids outside the vocabulary [0, {self._vocab}): {bad[:5]}")
        if len(ids) >= self.max_positions:
            raise PromptTooLong(len(ids), self.max_positions)

    def prefill(self, row: Row) -> tuple[Any, Any, bool]:
        """Prefill one prompt after its longest stored prefix: (last logits, its cache, whether caches merge).

        Alone, so exact (no padding) and without a B x L x L mask (8 agent prompts of 12k tokens
        would take gigabytes). Mergeable caches (plain dynamic layers) have their blocks stored.
        """
        import torch
        from transformers.cache_utils import DynamicCache, DynamicLayer

        start, stored, routed = self.prefix.lookup(row.prompt)
        kwargs: dict[str, Any] = {}
        if stored is not None:
            past = DynamicCache()
            for j in range(stored.shape[0]):
                past.update(stored[j, 0][None], stored[j, 1][None], j)
            kwargs = {self.cache_arg: past, "position_ids": torch.arange(start, len(row.prompt), device=self.device)[None]}
            row.cached_tokens = start
            self.stats["prefix_hit_tokens"] += start
        ids = torch.tensor([row.prompt[start:]], device=self.device)
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **kwargs)
        if self.routing is not None:
            if routed is not None:
                row.add_routing(routed)
            row.add_routing(self.routing.take())
        cache = getattr(out, self.cache_arg)
        mergeable = isinstance(cache, DynamicCache) and all(type(layer) is DynamicLayer for layer in cache.layers)
        if mergeable:
            self.prefix.put(row.prompt, [(layer.keys, layer.values) for layer in cache.layers], routing=row.routed())
        return out.logits[0, -1, :].float().cpu(), cache, mergeable

    def _next_seed(self, request: CompletionRequest) -> int:
        if request.seed is not None:
            return request.seed
        if self.seed is None:
            return random.getrandbits(63)
        return call_seed(self.seed, request.session_id, request.call_index)


def call_seed(seed: int, session_id: str, call_index: int) -> int:
    """A 63-bit seed for one call, fixed by (backend seed, session, call index) and nothing else."""
    digest = hashlib.blake2b(f"{seed}:{session_id}:{call_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1
