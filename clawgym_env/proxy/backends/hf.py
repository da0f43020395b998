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
``usage["cached_prompt_tokens"]`` says how many prompt tokens were reused. The running batch holds the
prefix its calls share with another session's prompt (the *trunk*: a harness's system prompt and
tools, at least ``min_trunk_tokens``) once, not once per call (``_hf_shared``).

Adapters: ``adapter`` (or a LoRA adapter folder as ``model_path``) is merged into the base weights at
load (``clawgym_env.models.adapter``).

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
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Literal

from clawgym_env.errors import ConfigError, PolicyBackendError, PromptTooLong
from clawgym_env.proxy.backends._hf_batch import Batcher
from clawgym_env.proxy.backends._hf_prefix import PrefixCache
from clawgym_env.proxy.backends._hf_routing import RoutingTap
from clawgym_env.proxy.backends._hf_row import Job, Row
from clawgym_env.proxy.backends._hf_shared import SlotCache, Trunk, register_shared_attention
from clawgym_env.proxy.backends.base import Completion, CompletionDelta, CompletionRequest, StreamingBackend

__all__ = ["HFBackend", "call_seed"]

LogprobsMode = Literal["raw", "tempered"]


class HFBackend(StreamingBackend):
    """A Hugging Face causal LM served in this process (CPU or GPU)."""

    TOKEN_LEVEL = True
    WEIGHT_UPDATE = "copy"
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
        min_trunk_tokens: int = 256,
        adapter: str | Path | None = None,
    ) -> None:
        import torch
        from transformers import AutoTokenizer
        from transformers.cache_utils import DynamicCache, DynamicLayer

        from clawgym_env.models.adapter import adapter_base, is_adapter, load_merged

        if max_batch < 1:
            raise ConfigError(f"HFBackend: max_batch must be >= 1, got {max_batch}")
        if logprobs_mode not in ("raw", "tempered"):
            raise ConfigError(f"HFBackend: logprobs_mode must be 'raw' or 'tempered', got {logprobs_mode!r}")
        path = Path(model_path)
        if adapter is None and is_adapter(path):  # an adapter folder names its base
            path, adapter = adapter_base(path), path
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
        self.adapter = None if adapter is None else Path(adapter)
        """The LoRA adapter merged into the base weights at load (``clawgym_env.models.adapter``), if any."""
        self._tokenizer = AutoTokenizer.from_pretrained(path)
        model: Any = load_merged(path, adapter, dtype=torch_dtype or "auto", attn_implementation=register_shared_attention())
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
        probe = DynamicCache(config=self.model.config)
        self.plain_cache = bool(probe.layers) and all(type(layer) is DynamicLayer for layer in probe.layers)
        """Every cache layer a plain dynamic one: calls share slots and a trunk (``_hf_batch``); else one at a time."""
        self.num_layers = len(probe.layers)
        self.min_trunk_tokens = min_trunk_tokens
        self._recent: OrderedDict[str, list[int]] = OrderedDict()  # session -> its latest prompt (trunk search)
        self.routing = RoutingTap.attach(self.model)
        """Hooks recording the routed experts of a mixture-of-experts model; None for a dense one."""
        self._batcher = Batcher(self)
        self.stats: dict[str, float] = {
            "calls": 0,
            "steps": 0,
            "joins": 0,
            "max_rows": 0,
            "prefix_hit_tokens": 0,
            "prefill_tokens": 0,
            "prefill_s": 0.0,
            "decoded_tokens": 0,
            "decode_s": 0.0,
            "trunk_rows": 0,
            "adopted": 0,
        }
        """Counters: calls, decode steps, calls that joined rows already decoding, the largest batch, reused tokens,
        tokens prefilled and the seconds it took, tokens decoded (a row's step) and the seconds of decode steps, calls
        that attended to a shared trunk, and rows that dropped their own copy of a trunk formed after they joined."""

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

    def update_weights(self, state: Mapping[str, Any], version: int, *, strict: bool = True) -> None:
        """Load a new state dict once the running rows finish; later calls carry ``version``."""

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

    def prefill(self, row: Row, trunk: Trunk | None) -> tuple[Any, Any, bool]:
        """Prefill one prompt after ``trunk`` (when it opens with it) and its longest stored prefix beyond:
        (last logits, its keys/values, whether it uses the trunk).

        Alone, so exact (no padding). With plain cache layers the keys/values are those after the trunk (per layer,
        ``(1, kv_heads, n, head_dim)``), and the prompt's blocks are stored; otherwise the model's own cache.
        """
        import torch

        if not self.plain_cache:
            out = self.model(input_ids=torch.tensor([row.prompt], device=self.device), use_cache=True, logits_to_keep=1)
            if self.routing is not None:
                row.add_routing(self.routing.take())
            return out.logits[0, -1, :].float().cpu(), getattr(out, self.cache_arg), False
        uses = trunk is not None and trunk.starts(row.prompt)
        skip = len(trunk) if uses and trunk is not None else 0
        self.stats["trunk_rows"] += uses
        start, stored, routed = self.prefix.lookup(row.prompt, skip)
        cache = SlotCache(self.num_layers, self.device)
        if stored is not None:
            cache.put(0, [(stored[j, 0][None], stored[j, 1][None]) for j in range(stored.shape[0])])
        if start:
            row.cached_tokens = start
            self.stats["prefix_hit_tokens"] += start
        if self.routing is not None:
            for part in (trunk.routing if uses and trunk is not None else None, routed):
                if part is not None:
                    row.add_routing(part)
        cache.pos = torch.tensor([start - skip], device=self.device)
        new = len(row.prompt) - start
        seen = torch.arange(len(row.prompt) - skip, device=self.device)
        mask = (seen[None, :] <= seen[start - skip :, None])[None, None]  # causal after what the slot already holds
        out = self.model(
            input_ids=torch.tensor([row.prompt[start:]], device=self.device),
            attention_mask=mask,
            position_ids=torch.arange(start, len(row.prompt), device=self.device)[None],
            use_cache=True,
            logits_to_keep=1,
            trunk=trunk if uses else None,
            trunk_uses=None,
            **{self.cache_arg: cache},
        )
        cache.pos = cache.pos + new
        if self.routing is not None:
            row.add_routing(self.routing.take())
        layers = cache.slot(0)
        self.prefix.put(row.prompt, layers, offset=-skip, routing=row.routed(), start=skip)
        return out.logits[0, -1, :].float().cpu(), layers, uses

    def find_trunk(self, prompt: list[int], session_id: str) -> Trunk | None:
        """The block-aligned prefix ``prompt`` shares with the latest prompt of another session, if at least
        ``min_trunk_tokens`` long and stored (its keys/values then come from the prefix store, read once)."""
        import numpy as np

        other = next((p for sid, p in reversed(self._recent.items()) if sid != session_id), None)
        if other is None:
            return None
        n = min(len(prompt), len(other))
        differ = np.flatnonzero(np.asarray(prompt[:n]) != np.asarray(other[:n]))
        same = int(differ[0]) if len(differ) else n
        block = self.prefix.block
        t = min(same, len(prompt) - 1) // block * block
        if t < self.min_trunk_tokens:
            return None
        hit, kv, routing = self.prefix.lookup(prompt[: t + 1])
        if hit < t or kv is None:
            return None
        return Trunk(prompt[:t], kv, routing)

    def remember(self, prompt: list[int], session_id: str) -> None:
        """Keep ``prompt`` as its session's latest (``find_trunk`` compares with other sessions')."""
        self._recent[session_id] = prompt
        self._recent.move_to_end(session_id)
        while len(self._recent) > 16:
            self._recent.popitem(last=False)

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
