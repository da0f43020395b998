"""Continuous batching for the HF backend: requests join and leave the running batch per decode step.

A worker thread owns one running batch: a slot per row in a cache written in place, each row at its
own position, and the prompt prefix the rows share (the trunk: a harness's system prompt and tools)
held once (``_hf_shared``). Between decode steps it admits queued calls (each prompt prefilled alone,
after the longest prefix the shared ``PrefixCache`` holds) and retires finished rows (their
keys/values stored for later calls, their results delivered, their slots freed). Rows never wait
for a batch to end, and a batch never waits for its longest row. Models whose cache layers are not
plain dynamic layers (sliding windows, recurrent states) decode one call at a time in their own cache.

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
from clawgym_env.proxy.backends._hf_shared import SlotCache, Trunk
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
    """The rows decoding together: a slot each in one ``SlotCache``, and at most one shared ``Trunk``.

    A slot holds its row's keys/values after the trunk (all of them when the row does not use it); free
    slots between rows decode a dummy token that attends to itself only, and are reused by the next row.
    """

    def __init__(self, backend: HFBackend) -> None:
        self.backend = backend
        self.slots: list[Row | None] = []
        self.uses: list[bool] = []  # slot attends to the trunk
        self.cache = SlotCache(backend.num_layers, backend.device)
        self.trunk: Trunk | None = None

    @property
    def rows(self) -> list[Row]:
        """The running rows, in slot order."""
        return [r for r in self.slots if r is not None]

    def join(self, row: Row, layers: list[tuple[Any, Any]], uses_trunk: bool) -> None:
        """Give a prefilled row (``layers``: its keys/values after the trunk it uses, or all) the first free slot."""
        slot = next((i for i, r in enumerate(self.slots) if r is None), len(self.slots))
        if slot == len(self.slots):
            self.slots.append(None)
            self.uses.append(False)
        self.cache.put(slot, layers)
        self.slots[slot], self.uses[slot], row.slot = row, uses_trunk, slot

    def wants_trunk(self) -> bool:
        """No running row attends to a trunk: one may be (re)chosen for the next row."""
        return self.trunk is None or not any(u for u, r in zip(self.uses, self.slots, strict=True) if r is not None)

    def adopt(self) -> None:
        """Rows that joined before the trunk did but open with it: drop their copy of it and attend to the trunk."""
        if self.trunk is None:
            return
        t = len(self.trunk)
        for i, r in enumerate(self.slots):
            if r is not None and not self.uses[i] and self.trunk.starts(r.prompt):
                self.cache.shift(i, t)
                self.uses[i] = True
                self.backend.stats["adopted"] += 1

    def decode(self, backend: HFBackend) -> Any:
        """Feed every row its last sampled id; the next logits (rows, vocab), CPU fp32."""
        import torch

        dev = self.cache.pos.device
        live = torch.tensor([r is not None for r in self.slots], device=dev)
        nxt = torch.tensor([[r.ids[-1] if r is not None else 0] for r in self.slots], device=dev)
        positions = torch.tensor([[len(r.prompt) + len(r.ids) - 1 if r is not None else 0] for r in self.slots], device=dev)
        pos = self.cache.pos
        mask = (torch.arange(int(pos.max()) + 1, device=dev)[None, :] <= pos[:, None])[:, None, None, :]
        trunk = self.trunk if self.trunk is not None and any(self.uses) else None
        out = backend.model(
            input_ids=nxt,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            trunk=trunk,
            trunk_uses=torch.tensor(self.uses, device=dev),
            **{backend.cache_arg: self.cache},
        )
        self.cache.pos = pos + live.long()
        if backend.routing is not None:
            experts = backend.routing.take()  # one row per slot, in slot order
            for i, r in enumerate(self.slots):
                if r is not None:
                    r.add_routing(experts[i : i + 1])
        index = torch.tensor([i for i, r in enumerate(self.slots) if r is not None], device=dev)
        return out.logits[index, -1, :].float().cpu()

    def kv_of(self, row: Row) -> tuple[list[int], list[tuple[Any, Any]], int, Any, int]:
        """``row``'s ids in the cache (prompt + completion but the last id), the keys/values of those after the
        trunk it uses (per layer), their column offset, its experts, and where its own part starts."""
        skip = len(self.trunk) if self.trunk is not None and self.uses[row.slot] else 0
        n = len(row.prompt) + len(row.ids) - 1
        return (row.prompt + row.ids)[:n], self.cache.slot(row.slot), -skip, row.routed(), skip

    def drop_done(self) -> None:
        """Free the slots of finished rows; shrink the buffers when few rows are left in them."""
        for i, r in enumerate(self.slots):
            if r is not None and r.done:
                self.slots[i] = None
                self.cache.pos[i] = 0
        while self.slots and self.slots[-1] is None:
            self.slots.pop()
            self.uses.pop()
        self.cache.pos = self.cache.pos[: len(self.slots)]
        if not self.slots:
            self.cache, self.trunk = SlotCache(self.backend.num_layers, self.backend.device), None
            return
        live = [i for i, r in enumerate(self.slots) if r is not None]
        if 2 * len(live) < len(self.slots) or self.cache.width() > 2 * int(self.cache.pos.max()) + 256:
            self.cache.keep(live)
            self.slots = [self.slots[i] for i in live]
            self.uses = [self.uses[i] for i in live]
            for j, r in enumerate(self.slots):
                r.slot = j  # type: ignore[union-attr]


class SoloBatch:
    """One row at a time in the model's own cache: models whose cache layers are not plain (sliding windows,
    recurrent states) cannot share slots or a trunk."""

    def __init__(self, backend: HFBackend) -> None:
        self.rows: list[Row] = []
        self.cache: Any = None
        self.trunk: Trunk | None = None

    def join(self, row: Row, cache: Any, uses_trunk: bool) -> None:
        self.rows, self.cache = [row], cache

    def wants_trunk(self) -> bool:
        return False

    def adopt(self) -> None:
        """Nothing to share."""

    def decode(self, backend: HFBackend) -> Any:
        import torch

        r = self.rows[0]
        nxt = torch.tensor([[r.ids[-1]]], device=backend.device)
        positions = torch.tensor([[len(r.prompt) + len(r.ids) - 1]], device=backend.device)
        out = backend.model(input_ids=nxt, position_ids=positions, use_cache=True, **{backend.cache_arg: self.cache})
        self.cache = getattr(out, backend.cache_arg)
        if backend.routing is not None:
            r.add_routing(backend.routing.take())
        return out.logits[:, -1, :].float().cpu()

    def kv_of(self, row: Row) -> tuple[list[int], list[tuple[Any, Any]], int, Any, int]:
        raise RuntimeError("a model without plain cache layers stores no prefix")

    def drop_done(self) -> None:
        if self.rows and self.rows[0].done:
            self.rows, self.cache = [], None


class Batcher:
    """The worker thread, its queue and running batch, and the weight-update drain."""

    def __init__(self, backend: HFBackend) -> None:
        self.backend = backend
        self.queue: queue.Queue[Job | None] = queue.Queue()
        self.cond = threading.Condition()
        self.draining = 0  # weight updates waiting for the running rows to finish
        self.busy = False  # rows are running (under the current weights)
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
        import torch

        with torch.inference_mode():  # this thread only runs the model; its caches are written in place
            self._loop()

    def _loop(self) -> None:
        batch, pending, closing = self._new_batch(), deque[Job](), False
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
                limit = self.backend.max_batch if self.backend.plain_cache else 1
                while admit and pending and len(batch.rows) < limit:
                    self._admit(pending.popleft(), batch)
                if batch.rows:
                    self._step(batch)
            except Exception as exc:  # noqa: BLE001 - the batch's own forward failed: delivered to every caller in it
                err = _failed(exc)
                for r in batch.rows:
                    r.job.loop.call_soon_threadsafe(_finish, r.job, err)
                batch = self._new_batch()
            if not batch.rows:
                with self.cond:
                    self.busy = False
                    self.cond.notify_all()
        for job in pending:
            job.loop.call_soon_threadsafe(_finish, job, PolicyBackendError("HFBackend was closed before this call ran"))
        self._fail_queued()

    def _new_batch(self) -> RunningBatch | SoloBatch:
        return RunningBatch(self.backend) if self.backend.plain_cache else SoloBatch(self.backend)

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

    def _admit(self, job: Job, batch: RunningBatch | SoloBatch) -> None:
        """Prefill one call, sample its first id; it joins the batch unless that id already ended it."""
        if job.future.done():  # its caller gave up while it was queued
            return
        b = self.backend
        stats = b.stats
        job.version = b.policy_version
        stats["calls"] += 1
        try:  # what one request asks (its seed, its prompt) can fail only that request: never the batch, never a hang
            row = Row(
                job,
                tokenizer=b.tokenizer,
                eos=b.eos_token_ids,
                max_positions=b.max_positions,
                raw_logprobs=b.logprobs_mode == "raw",
                num_experts=b.routing.num_experts if b.routing else None,
            )
            if row.done:  # no room for a single token
                job.loop.call_soon_threadsafe(_finish, job, row.result())
                return
            t0 = time.perf_counter()
            if batch.wants_trunk():  # the prefix this call shares with another session's, if stored
                batch.trunk = b.find_trunk(row.prompt, job.request.session_id)
                batch.adopt()
            b.remember(row.prompt, job.request.session_id)
            logits, cache, uses_trunk = b.prefill(row, batch.trunk)
            stats["prefill_s"] += time.perf_counter() - t0
            stats["prefill_tokens"] += len(row.prompt) - row.cached_tokens
            row.step(logits)
        except Exception as exc:  # noqa: BLE001 - this call's failure, not the batch's
            job.loop.call_soon_threadsafe(_finish, job, _failed(exc))
            return
        if row.done:
            job.loop.call_soon_threadsafe(_finish, job, row.result())
            return
        stats["joins"] += bool(batch.rows)
        batch.join(row, cache, uses_trunk)
        stats["max_rows"] = max(stats["max_rows"], len(batch.rows))

    def _step(self, batch: RunningBatch | SoloBatch) -> None:
        """One decode step for every running row; finished rows leave with their results."""
        b = self.backend
        t0 = time.perf_counter()
        logits = batch.decode(b)
        b.stats["decode_s"] += time.perf_counter() - t0
        b.stats["steps"] += 1
        b.stats["decoded_tokens"] += len(batch.rows)
        for i, r in enumerate(batch.rows):
            try:
                r.step(logits[i])
            except Exception as exc:  # noqa: BLE001 - this row's sampling failed: it leaves alone, the others decode on
                r.done, r.finish = True, "error"
                r.job.loop.call_soon_threadsafe(_finish, r.job, _failed(exc))
                continue
            if r.done:
                if b.plain_cache and r.finish != "error":
                    b.prefix.put(*batch.kv_of(r))
                r.job.loop.call_soon_threadsafe(_finish, r.job, r.result())
        batch.drop_done()
