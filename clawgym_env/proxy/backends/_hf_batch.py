"""Continuous batching for the HF backend: requests join and leave the running batch per decode step.

A worker thread owns one running batch: a left-padded KV cache with a mask, each row at its own
position. Between decode steps it admits queued calls (each prompt prefilled alone, after the
longest prefix the shared ``PrefixCache`` holds, then padded into the batch cache) and retires
finished rows (their keys/values stored for later calls, their results delivered, their cache
rows dropped and all-padding columns trimmed). Rows never wait for a batch to end, and a batch
never waits for its longest row. Models whose cache layers are not plain dynamic layers
(sliding windows, recurrent states) cannot be padded together and decode one call at a time.

Weight updates drain: no call is admitted while one waits, the running rows finish under the old
weights (their captures say so), then the new weights load and the prefix store empties.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from clawgym_env.errors import PolicyBackendError
from clawgym_env.proxy.backends._hf_row import Job, Row
from clawgym_env.proxy.backends.base import deliver

if TYPE_CHECKING:
    from clawgym_env.proxy.backends.hf import HFBackend

__all__ = ["Batcher"]


def _failed(exc: Exception) -> PolicyBackendError:
    err = PolicyBackendError(f"HFBackend generation failed: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


def _finish(job: Job, result: Any) -> None:
    """Runs on the job's loop: resolve its future or, streaming, end its delta queue with the result."""
    if job.deltas is None:
        deliver(job.future, result)
    elif not job.future.done():
        job.deltas.put_nowait(result)
        job.future.cancel()  # the stream's reader takes the result (or error) from the queue


class RunningBatch:
    """The rows decoding together and their one left-padded KV cache."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.rows: list[Row] = []
        self.cache: Any = None
        self.mask: Any = None  # (rows, width) long: 1 where a row has a token

    def join(self, row: Row, cache: Any) -> None:
        """Add a prefilled row (its cache holds exactly its prompt), padding whichever side is shorter."""
        import torch
        import torch.nn.functional as F

        n = len(row.prompt)
        if not self.rows:
            self.rows, self.cache = [row], cache
            self.mask = torch.ones((1, n), dtype=torch.long, device=self.device)
            return
        width = self.mask.shape[1]
        grow, pad = max(0, n - width), max(0, width - n)
        for mine, theirs in zip(self.cache.layers, cache.layers, strict=True):
            for attr in ("keys", "values"):
                a, b = getattr(mine, attr), getattr(theirs, attr)
                setattr(mine, attr, torch.cat([F.pad(a, (0, 0, grow, 0)), F.pad(b, (0, 0, pad, 0))]))
        new = torch.zeros((1, max(width, n)), dtype=torch.long, device=self.mask.device)
        new[0, pad:] = 1
        self.mask = torch.cat([F.pad(self.mask, (grow, 0)), new])
        self.rows.append(row)

    def decode(self, backend: HFBackend) -> Any:
        """Feed every row its last sampled id; the next logits (rows, vocab), CPU fp32."""
        import torch

        dev = self.mask.device
        nxt = torch.tensor([[r.ids[-1]] for r in self.rows], device=dev)
        positions = torch.tensor([[len(r.prompt) + len(r.ids) - 1] for r in self.rows], device=dev)
        self.mask = torch.cat([self.mask, torch.ones_like(nxt)], dim=1)
        out = backend.model(input_ids=nxt, attention_mask=self.mask, position_ids=positions, use_cache=True,
                            **{backend.cache_arg: self.cache})
        self.cache = getattr(out, backend.cache_arg)
        if backend.routing is not None:
            experts = backend.routing.take()  # one row per running call, in batch order
            for i, r in enumerate(self.rows):
                r.add_routing(experts[i : i + 1])
        return out.logits[:, -1, :].float().cpu()

    def kv_of(self, i: int) -> tuple[list[int], list[tuple[Any, Any]], int, Any]:
        """Row ``i``'s ids in the cache (prompt + completion but the last id), their per-layer KV, offset and experts."""
        r = self.rows[i]
        n = len(r.prompt) + len(r.ids) - 1
        layers = [(layer.keys[i : i + 1], layer.values[i : i + 1]) for layer in self.cache.layers]
        return (r.prompt + r.ids)[:n], layers, self.mask.shape[1] - n, r.routed()

    def drop_done(self) -> None:
        """Remove finished rows from the batch and the cache; trim columns that only pad."""
        keep = [i for i, r in enumerate(self.rows) if not r.done]
        if not keep:
            self.rows, self.cache, self.mask = [], None, None
            return
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in keep]
        self.mask = self.mask[keep]
        start = int(self.mask.any(0).long().argmax())
        self.mask = self.mask[:, start:]
        for layer in self.cache.layers:
            layer.keys, layer.values = layer.keys[keep, :, start:], layer.values[keep, :, start:]


class Batcher:
    """The worker thread, its queue and running batch, and the weight-update drain."""

    def __init__(self, backend: HFBackend) -> None:
        self.backend = backend
        self.queue: queue.Queue[Job | None] = queue.Queue()
        self.cond = threading.Condition()
        self.draining = 0  # weight updates waiting for the running rows to finish
        self.busy = False  # rows are running (under the current weights)
        self.mergeable: bool | None = None  # unknown until the first prefill shows the cache type
        self._thread: threading.Thread | None = None

    def submit(self, job: Job) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="clawgym-hf-backend", daemon=True)
            self._thread.start()
        self.queue.put(job)

    def close(self) -> None:
        """Stop after the running rows finish; queued calls fail. Blocks until the thread ends."""
        self.queue.put(None)
        if self._thread is not None:
            self._thread.join()

    def swap_weights(self, load: Any) -> None:
        """Run ``load()`` once no row is running; no row is admitted meanwhile."""
        with self.cond:
            self.draining += 1
            try:
                while self.busy:
                    self.cond.wait()
                load()
            finally:
                self.draining -= 1
                self.cond.notify_all()

    # -- the worker ------------------------------------------------------------------------

    def _work(self) -> None:
        batch, pending, closing = RunningBatch(self.backend.device), deque[Job](), False
        while not (closing and not batch.rows):
            if not batch.rows and not pending:
                job = self.queue.get()
                if job is None:
                    break
                pending.append(job)
                closing = self._take(pending, wait_s=self.backend.batch_wait_s)
            else:
                closing = self._take(pending, wait_s=0.0) or closing
            with self.cond:
                while self.draining and not batch.rows:
                    self.cond.wait()
                admit = not self.draining and not closing
                self.busy = bool(batch.rows) or (admit and bool(pending))
            try:
                limit = self.backend.max_batch if self.mergeable is not False else 1
                while admit and pending and len(batch.rows) < limit:
                    self._admit(pending.popleft(), batch)
                    limit = self.backend.max_batch if self.mergeable is not False else 1
                if batch.rows:
                    self._step(batch)
            except Exception as exc:  # noqa: BLE001 - the batch's own forward failed: delivered to every caller in it
                err = _failed(exc)
                for r in batch.rows:
                    r.job.loop.call_soon_threadsafe(_finish, r.job, err)
                batch = RunningBatch(self.backend.device)
            if not batch.rows:
                with self.cond:
                    self.busy = False
                    self.cond.notify_all()
        for job in pending:
            job.loop.call_soon_threadsafe(_finish, job, PolicyBackendError("HFBackend was closed before this call ran"))
        self._fail_queued()

    def _take(self, pending: deque[Job], wait_s: float) -> bool:
        """Move queued jobs to ``pending`` (waiting up to ``wait_s`` for company); True on the close sentinel."""
        deadline = time.monotonic() + wait_s
        while len(pending) < self.backend.max_batch or wait_s == 0.0:
            remaining = deadline - time.monotonic()
            try:
                job = self.queue.get(timeout=remaining) if remaining > 0 else self.queue.get_nowait()
            except queue.Empty:
                return False
            if job is None:
                return True
            pending.append(job)
        return False

    def _fail_queued(self) -> None:
        while True:
            try:
                job = self.queue.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                job.loop.call_soon_threadsafe(_finish, job, PolicyBackendError("HFBackend was closed before this call ran"))

    def _admit(self, job: Job, batch: RunningBatch) -> None:
        """Prefill one call, sample its first id; it joins the batch unless that id already ended it."""
        import torch

        if job.future.done():  # its caller gave up while it was queued
            return
        b = self.backend
        stats = b.stats
        job.version = b.policy_version
        stats["calls"] += 1
        try:  # what one request asks (its seed, its prompt) can fail only that request: never the batch, never a hang
            row = Row(job, tokenizer=b.tokenizer, eos=b.eos_token_ids, max_positions=b.max_positions,
                      raw_logprobs=b.logprobs_mode == "raw", num_experts=b.routing.num_experts if b.routing else None)
            if row.done:  # no room for a single token
                job.loop.call_soon_threadsafe(_finish, job, row.result())
                return
            with torch.inference_mode():
                logits, cache, mergeable = b.prefill(row)
            row.step(logits)
        except Exception as exc:  # noqa: BLE001 - this call's failure, not the batch's
            job.loop.call_soon_threadsafe(_finish, job, _failed(exc))
            return
        self.mergeable = mergeable if self.mergeable is None else self.mergeable and mergeable
        if row.done:
            job.loop.call_soon_threadsafe(_finish, job, row.result())
            return
        stats["joins"] += bool(batch.rows)
        batch.join(row, cache)
        stats["max_rows"] = max(stats["max_rows"], len(batch.rows))

    def _step(self, batch: RunningBatch) -> None:
        """One decode step for every running row; finished rows leave with their results."""
        import torch

        b = self.backend
        with torch.inference_mode():
            logits = batch.decode(b)
        b.stats["steps"] += 1
        for i, r in enumerate(batch.rows):
            try:
                r.step(logits[i])
            except Exception as exc:  # noqa: BLE001 - this row's sampling failed: it leaves alone, the others decode on
                r.done, r.finish = True, "error"
                r.job.loop.call_soon_threadsafe(_finish, r.job, _failed(exc))
                continue
            if r.done:
                if self.mergeable and r.finish != "error":
                    b.prefix.put(*batch.kv_of(i))
                r.job.loop.call_soon_threadsafe(_finish, r.job, r.result())
        batch.drop_done()
