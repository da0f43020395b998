"""In-process transformers policy: exact prompt ids in, sampled ids + logprobs out, batched.

Concurrent ``handle`` calls are queued; one worker thread takes up to ``max_batch`` of them
(waiting ``batch_wait_s`` for company), left-pads the prompts and decodes them together with a
KV cache, each row with its own sampling parameters, stop conditions and random generator.
A batch runs to completion before the next starts (no continuous batching: this backend is for
CPU tests, small models and single-GPU runs; use vLLM for throughput).

Logprobs: each returned logprob is ``log_softmax(logits)[id]`` of the *raw* model distribution
(temperature 1, no top-p), whatever temperature/top-p sampled the id. That is the same quantity
a trainer recomputes with a forward pass of the policy, and what vLLM returns by default
(``logprobs_mode="raw_logprobs"``), so captures from both backends mean the same thing.
``logprobs_mode="tempered"`` returns ``log_softmax(logits / temperature)[id]`` instead (what
TRL recomputes when its ``temperature`` is set), still without the top-p mask.

Prefix reuse: each prompt is prefilled on its own (exact; no padding) and the per-row KV caches
are merged, left-padded, for decoding. Keys/values are kept per block of ``prefix_block_tokens``
in a store shared by all sessions (``_hf_prefix.PrefixCache``, LRU-bounded to ``prefix_cache_mb``):
a prompt's blocks right after its prefill (so the next episode of the same harness, or the next row
of this batch, skips the shared system prompt and tools), its completion's at the end (so the
session's next call, which extends this one, prefills only the new turn). ``update_weights``
empties the store. ``usage["cached_prompt_tokens"]`` says how many prompt tokens were reused.

Stops: ``completion_ids`` hold every sampled id, the EOS id included (it is trained on); on a
stop string, the ids end with the token that completed it and ``text`` is cut before it.
A call whose caller was cancelled (the harness hung up) stops decoding at the next step.

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
import queue
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from clawgym_env.errors import ConfigError, PolicyBackendError
from clawgym_env.proxy.backends._hf_prefix import PrefixCache
from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend

__all__ = ["HFBackend", "call_seed"]

LogprobsMode = Literal["raw", "tempered"]


@dataclass
class _Job:
    request: CompletionRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Completion]


class HFBackend(PolicyBackend):
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
        self._pad_id = self._tokenizer.pad_token_id if self._tokenizer.pad_token_id is not None else 0
        self._vocab = self.model.get_output_embeddings().weight.shape[0]
        self._max_positions = int(getattr(self.model.config, "max_position_embeddings", 1 << 30))
        # transformers >= 5.2x renamed the KV-cache argument and output field to ``cache``
        params = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._weights_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._prefix = PrefixCache(int(prefix_cache_mb * 2**20), prefix_block_tokens)
        self._row_wise: bool | None = None  # unknown until the first prefill shows the cache type
        self.stats = {"batches": 0, "calls": 0, "max_rows": 0, "row_prefills": 0, "prefix_hit_tokens": 0}
        """Counters: batches, calls, the largest batch, batches prefilled row by row (tests, benchmarks)."""

    # -- public surface ---------------------------------------------------------------------

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def model_name(self) -> str:
        return self.model_path.name

    async def handle(self, request: CompletionRequest) -> Completion:
        """Queue the request for the next batch and wait for its completion."""
        if self._closed:
            raise PolicyBackendError("HFBackend is closed; create a new backend")
        self._check_prompt(request.prompt_ids)
        loop = asyncio.get_running_loop()
        job = _Job(request, loop, loop.create_future())
        self._ensure_worker()
        self._queue.put(job)
        return await job.future

    def update_weights(self, weights: Any, version: int, *, strict: bool = True) -> None:
        """Copy new weights (a state dict or a module) in between batches; later calls carry ``version``."""
        state = weights.state_dict() if hasattr(weights, "state_dict") else weights
        with self._weights_lock:
            try:
                self.model.load_state_dict(state, strict=strict)
                self._prefix.clear()  # cached keys/values belong to the old weights
            except RuntimeError as exc:
                raise PolicyBackendError(f"update_weights: state dict does not fit {self.model_path}: {exc}") from exc
            self.policy_version = version

    async def aclose(self) -> None:
        """Stop the worker; queued calls fail with PolicyBackendError. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    # -- worker -----------------------------------------------------------------------------

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
        if len(ids) >= self._max_positions:
            raise PolicyBackendError(f"prompt of {len(ids)} tokens exceeds the model's {self._max_positions} positions")

    def _ensure_worker(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="clawgym-hf-backend", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                break
            jobs, stop = self._gather(job)
            jobs = [j for j in jobs if not j.future.done()]
            if jobs:
                try:
                    results: list[Completion | BaseException] = list(self._generate(jobs))
                except Exception as exc:  # noqa: BLE001 - delivered to every caller of the batch, never swallowed
                    err = PolicyBackendError(f"HFBackend generation failed: {type(exc).__name__}: {exc}")
                    err.__cause__ = exc
                    results = [err] * len(jobs)
                for j, r in zip(jobs, results, strict=True):
                    j.loop.call_soon_threadsafe(_deliver, j.future, r)
            if stop:
                break
        self._fail_pending()

    def _gather(self, first: _Job) -> tuple[list[_Job], bool]:
        jobs = [first]
        deadline = time.monotonic() + self.batch_wait_s
        while len(jobs) < self.max_batch:
            remaining = deadline - time.monotonic()
            try:
                nxt = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                return jobs, True
            jobs.append(nxt)
        return jobs, False

    def _fail_pending(self) -> None:
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                err = PolicyBackendError("HFBackend was closed before this call ran")
                job.loop.call_soon_threadsafe(_deliver, job.future, err)

    def _generate(self, jobs: list[_Job]) -> list[Completion]:
        import torch

        with self._weights_lock, torch.inference_mode():
            version = self.policy_version
            self.stats["batches"] += 1
            self.stats["calls"] += len(jobs)
            self.stats["max_rows"] = max(self.stats["max_rows"], len(jobs))
            rows = [_Row(self, j.request, j.future) for j in jobs]
            logits, cache, mask, positions, row_wise = self._prefill(rows)
            while True:
                step = [r.step(logits[i]) for i, r in enumerate(rows)]
                if all(r.done for r in rows):
                    break
                nxt = torch.tensor([[t if t is not None else self._pad_id] for t in step], device=self.device)
                mask = torch.cat([mask, torch.ones_like(nxt)], dim=1)
                positions = positions[:, -1:] + 1
                out = self.model(
                    input_ids=nxt, attention_mask=mask, position_ids=positions, use_cache=True, **{self._cache_arg: cache}
                )
                logits, cache = out.logits[:, -1, :].float().cpu(), getattr(out, self._cache_arg)
            if row_wise and self._prefix.budget > 0:
                self._remember(rows, cache, width=max(len(r.prompt) for r in rows))
            return [r.result(version) for r in rows]

    def _remember(self, rows: list[_Row], cache: Any, width: int) -> None:
        """Store each row's prompt + completion blocks (but its last id, never fed back in) for later calls."""
        for i, r in enumerate(rows):
            n = len(r.prompt) + len(r.ids) - 1
            layers = [(layer.keys[i : i + 1], layer.values[i : i + 1]) for layer in cache.layers]
            self._prefix.put((r.prompt + r.ids)[:n], layers, offset=width - len(r.prompt))

    def _prefill(self, rows: list[_Row]) -> tuple[Any, Any, Any, Any, bool]:
        """Run the prompts; return last-position logits (CPU fp32), KV cache, mask, positions, row_wise.

        Each prompt is prefilled alone (no padding: exact, and no B x L x L attention mask, which
        for 8 agent prompts of 12k tokens would take gigabytes), starting after the longest prefix
        its session's previous call left in the prefix store; the per-row caches are then
        left-padded into one batch cache for decoding. Models whose cache layers are not plain
        dynamic layers (sliding windows, recurrent states) take one padded batched prefill instead.
        """
        import torch
        import torch.nn.functional as F

        prompts = [r.prompt for r in rows]
        width = max(len(p) for p in prompts)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            mask[i, width - len(p) :] = 1
        mask = mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        outs: list[Any] = []
        for r in rows if self._row_wise is not False else ():
            out = self._prefill_row(r)
            if out is None:
                outs = []
                break
            outs.append(out)
        if outs:
            caches = [getattr(o, self._cache_arg) for o in outs]
            merged = caches[0]
            for j, layer in enumerate(merged.layers):
                for attr in ("keys", "values"):
                    parts = [getattr(c.layers[j], attr) for c in caches]
                    padded = [F.pad(t, (0, 0, width - t.shape[-2], 0)) for t in parts]
                    setattr(layer, attr, torch.cat(padded, dim=0))
            logits = torch.cat([o.logits[:, -1, :] for o in outs]).float().cpu()
            self.stats["row_prefills"] += 1
            return logits, merged, mask, positions, True
        ids = torch.full((len(prompts), width), self._pad_id, dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
        ids = ids.to(self.device)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].float().cpu(), getattr(out, self._cache_arg), mask, positions, False

    def _prefill_row(self, row: _Row) -> Any | None:
        """Prefill one prompt, reusing its session's stored prefix; None if the cache cannot be merged."""
        import torch
        from transformers.cache_utils import DynamicCache, DynamicLayer

        start, stored = self._prefix.lookup(row.prompt)
        kwargs: dict[str, Any] = {}
        if stored is not None:
            past = DynamicCache()
            for j in range(stored.shape[0]):
                past.update(stored[j, 0][None], stored[j, 1][None], j)
            kwargs = {self._cache_arg: past, "position_ids": torch.arange(start, len(row.prompt), device=self.device)[None]}
            row.cached_tokens = start
            self.stats["prefix_hit_tokens"] += start
        ids = torch.tensor([row.prompt[start:]], device=self.device)
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **kwargs)
        layers = getattr(getattr(out, self._cache_arg), "layers", [None])
        self._row_wise = all(type(layer) is DynamicLayer for layer in layers)
        if self._row_wise:  # the next row of this batch (or any later call) may share this prompt's blocks
            self._prefix.put(row.prompt, [(layer.keys, layer.values) for layer in layers])
        return out if self._row_wise else None

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


def _deliver(future: asyncio.Future[Completion], result: Completion | BaseException) -> None:
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


class _Row:
    """One request's decoding state inside a batch."""

    def __init__(self, backend: HFBackend, request: CompletionRequest, future: asyncio.Future[Completion]) -> None:
        import torch

        self.backend = backend
        self.request = request
        self.prompt = list(request.prompt_ids or [])
        self.budget = max(0, min(request.max_tokens, backend._max_positions - len(self.prompt)))
        self.generator = torch.Generator().manual_seed(backend._next_seed(request))
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.text_end: int | None = None
        self.finish = "length"
        self.done = self.budget == 0
        self.future = future
        self.cached_tokens = 0
        """Its caller's future: once cancelled (the harness hung up), the row stops decoding."""

    def step(self, logits: Any) -> int | None:
        """Sample one token from this row's logits; None once the row is finished."""
        import torch

        if self.done:
            return None
        if self.future.cancelled():
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
        lp = raw[token] if self.backend.logprobs_mode == "raw" or req.temperature <= 0 else scaled[token]
        self.ids.append(token)
        self.logprobs.append(float(lp))
        self._check_finished(token)
        return token

    def _check_finished(self, token: int) -> None:
        if token in self.backend.eos_token_ids:
            self.done, self.finish = True, "stop"
        elif self.request.stop:
            text = self.backend.tokenizer.decode(self.ids, skip_special_tokens=True)
            hits = [text.find(s) for s in self.request.stop if s and s in text]
            if hits:
                self.done, self.finish, self.text_end = True, "stop", min(hits)
        if not self.done and len(self.ids) >= self.budget:
            self.done, self.finish = True, "length"

    def result(self, version: int) -> Completion:
        text = self.backend.tokenizer.decode(self.ids, skip_special_tokens=True)
        if self.text_end is not None:
            text = text[: self.text_end]
        return Completion(
            completion_ids=self.ids,
            logprobs=self.logprobs,
            text=text,
            finish_reason=self.finish,
            policy_version=version,
            usage={"prompt_tokens": len(self.prompt), "completion_tokens": len(self.ids), "cached_prompt_tokens": self.cached_tokens},
        )
