"""The hf rollout policy in a child process (``--rollout_process``): generation off the trainer's GIL.

Why: with the local executor the rollout policy (``HFBackend``) decodes in a thread of the
trainer's process. On CPU both are Python-heavy (a tiny model's forward is mostly module-call
overhead), so under ``--async_rollouts`` the trainer's step and the rollouts' decoding take turns
on one GIL instead of running on two cores: measured on the demo, the train step took 2-3x longer
while rollouts ran beside it. Here the ``HFBackend`` lives in a spawned child; the proxy's calls
and the trainer's weight pushes go to it over a pipe (tensors through torch's shared-memory
pickling). The proxy keeps the tokenizer in this process. Same sampling, seeds and logprobs as
the in-process backend (tested). With ``--weight_sync broadcast`` the child instead joins the
trainer's weight group as rank 1 and receives the tensors there (gloo on CPU, NCCL on GPUs:
``trainers.core.collective_sync``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from clawgym_env.errors import PolicyBackendError
from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend, deliver

__all__ = ["ChildHFBackend"]


def _serve(spec: str, tokenizer_path: str, conn: Any) -> None:
    """The child: one ``HFBackend`` built from ``spec``, answering the parent's messages until "close"."""
    import torch.multiprocessing  # noqa: F401 - registers tensor pickling through shared memory

    from clawgym_env.proxy.backends.factory import backend_from_spec

    try:
        backend = backend_from_spec(spec, tokenizer_path=tokenizer_path, option="--rollout_backend")
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", None, f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None, None))
    asyncio.run(_answer(backend, conn))


async def _answer(backend: Any, conn: Any) -> None:
    loop = asyncio.get_running_loop()
    calls: dict[int, asyncio.Task[None]] = {}
    group: list[Any] = []  # the weight group, once joined (--weight_sync broadcast)

    async def call(key: int, request: CompletionRequest) -> None:
        try:
            conn.send(("done", key, await backend.handle(request)))
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001 - the caller gets it as a PolicyBackendError
            conn.send(("error", key, f"{type(exc).__name__}: {exc}"))
        finally:
            calls.pop(key, None)

    while True:
        kind, key, payload = await loop.run_in_executor(None, conn.recv)
        if kind == "call":
            calls[key] = asyncio.ensure_future(call(key, payload))
        elif kind == "cancel" and key in calls:
            calls[key].cancel()
        elif kind == "weights":
            state, version = payload
            await asyncio.to_thread(backend.update_weights, state, version)
            conn.send(("weights", key, None))
        elif kind in ("join", "receive"):
            try:
                await asyncio.to_thread(_weight_group_message, backend, group, kind, payload)
                conn.send(("done", key, None))
            except Exception as exc:  # noqa: BLE001 - the trainer's push raises it
                conn.send(("error", key, f"{type(exc).__name__}: {exc}"))
        elif kind == "close":
            for t in list(calls.values()):
                t.cancel()
            await backend.aclose()
            conn.send(("closed", key, None))
            return


def _weight_group_message(backend: Any, group: list[Any], kind: str, payload: Any) -> None:
    """The child's side of ``CollectiveBroadcast``: join the group as rank 1, or receive and load a version."""
    import torch

    from clawgym_env.proxy.backends.vllm_worker.clawgym_weight_group import open_group, receive_state

    if kind == "join":
        host, port, world_size, name = payload
        group[:] = [open_group(host, port, 1, world_size, name), name]
        return
    meta, version = payload
    pg, name = group
    device = next(backend.model.parameters()).device if name == "nccl" else torch.device("cpu")
    backend.update_weights(dict(receive_state(pg, meta, device)), version)


class ChildHFBackend(PolicyBackend):
    """An ``hf:`` policy spec served by a child process; ``update_weights`` as ``HFBackend``'s."""

    TOKEN_LEVEL = True
    WEIGHT_UPDATE = "copy"
    name = "hf"

    def __init__(self, spec: str, tokenizer_path: str | Path) -> None:
        import torch.multiprocessing as mp
        from transformers import AutoTokenizer

        if not spec.startswith("hf:"):
            raise PolicyBackendError(f"--rollout_process runs an hf: policy in a child process; got {spec!r}")
        import os

        import torch

        # the trainer's torch threads as with the policy in process (HFBackend sets them process-wide): half the cores
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
        self.spec = spec
        self.policy_version = 0
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(spec, str(tokenizer_path), child), name="clawgym-rollout-policy", daemon=True)
        self._proc.start()
        child.close()
        self._tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)  # while the child starts up and loads the model
        try:
            kind, _, why = self._conn.recv()
        except EOFError:  # the child died before it could say why: most often a script without the main guard
            self._proc.join(timeout=10)
            raise PolicyBackendError(
                f"--rollout_process: the child process exited (code {self._proc.exitcode}) before building {spec!r}; "
                'a script that starts training must do so under `if __name__ == "__main__":` (the child is spawned '
                "and imports the main module); see its error output above"
            ) from None
        if kind != "ready":
            self._proc.join(timeout=10)
            raise PolicyBackendError(f"--rollout_process: the child could not build {spec!r}: {why}")
        self._keys = itertools.count()
        self._send_lock = threading.Lock()
        self._calls: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Completion]]] = {}
        self._acks: dict[int, threading.Event] = {}
        self._pending: dict[int, Future[None]] = {}  # weight-group joins and receives (CollectiveBroadcast)
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="clawgym-rollout-policy-reader", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        """The child's process id (for CPU accounting, ``bench/train_async.py``)."""
        return self._proc.pid

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def model_name(self) -> str:
        return Path(self.spec[3:].partition("?")[0]).name

    def _send(self, kind: str, key: int, payload: Any) -> None:
        with self._send_lock:
            self._conn.send((kind, key, payload))

    async def handle(self, request: CompletionRequest) -> Completion:
        if self._closed:
            raise PolicyBackendError("ChildHFBackend is closed; create a new backend")
        loop = asyncio.get_running_loop()
        key = next(self._keys)
        future: asyncio.Future[Completion] = loop.create_future()
        self._calls[key] = (loop, future)
        self._send("call", key, request)
        try:
            return await future
        except asyncio.CancelledError:
            with contextlib.suppress(OSError):
                self._send("cancel", key, None)  # the harness hung up: the child stops decoding this row
            raise
        finally:
            self._calls.pop(key, None)

    def update_weights(self, state: Mapping[str, Any], version: int) -> None:
        """Hand a state dict to the child and return; it loads it once its running rows finish.

        The trainer does not wait for that drain (measured under async: it was most of the train
        step): calls sent after this one sample with the new weights (the child reads its pipe in
        order), and every completion carries the version that produced it. A second push first
        waits for the previous one to be loaded. Copies go through shared memory (not the
        trainer's own parameter storage, which pickling would otherwise move there).
        """
        self.wait_loaded()
        key = next(self._keys)
        self._acks[key] = threading.Event()
        self._send("weights", key, ({k: v.detach().cpu().clone() for k, v in state.items()}, version))
        self.policy_version = version

    @property
    def receivers(self) -> int:
        """Processes that join the weight group: the child."""
        return 1

    def _request(self, kind: str, payload: Any) -> Future[None]:
        key = next(self._keys)
        future: Future[None] = Future()
        self._pending[key] = future
        self._send(kind, key, payload)
        return future

    def join_weight_group(self, host: str, port: int, world_size: int, backend: str) -> Future[None]:
        """The child joins ``CollectiveBroadcast``'s group as rank 1 (the future completes once it has)."""
        return self._request("join", (host, port, world_size, backend))

    def receive_weights(self, meta: list[Any], version: int) -> Future[None]:
        """The child receives the announced tensors; calls sent after this one sample with them, as ``version``."""
        self.wait_loaded()
        future = self._request("receive", (meta, version))
        self.policy_version = version
        return future

    def wait_loaded(self) -> None:
        """Block until every pushed state dict is loaded in the child."""
        for key, done in list(self._acks.items()):
            while not done.wait(timeout=1.0):
                if not self._proc.is_alive():
                    raise PolicyBackendError(f"the rollout policy's child process died (exit code {self._proc.exitcode})")
            self._acks.pop(key, None)

    def _read(self) -> None:
        while True:
            try:
                kind, key, payload = self._conn.recv()
            except (EOFError, OSError):
                self._fail_all(f"the rollout policy's child process ended (exit code {self._proc.exitcode})")
                return
            if kind in ("weights", "closed"):
                if kind == "closed":
                    self._fail_all("ChildHFBackend was closed before this call finished")
                    return
                if key in self._acks:
                    self._acks[key].set()
                continue
            if key in self._pending:
                future = self._pending.pop(key)
                if kind == "done":
                    future.set_result(None)
                else:
                    future.set_exception(PolicyBackendError(f"rollout policy (child process): {payload}"))
                continue
            entry = self._calls.get(key)
            if entry is None:
                continue
            loop, call = entry
            result: Any = payload if kind == "done" else PolicyBackendError(f"rollout policy (child process): {payload}")
            loop.call_soon_threadsafe(deliver, call, result)

    def _fail_all(self, why: str) -> None:
        for future in list(self._pending.values()):
            if not future.done():
                future.set_exception(PolicyBackendError(why))
        for loop, call in list(self._calls.values()):
            loop.call_soon_threadsafe(deliver, call, PolicyBackendError(why))

    async def aclose(self) -> None:
        """Stop the child (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError, BrokenPipeError):
            self._send("close", next(self._keys), None)
        await asyncio.to_thread(self._reader.join, 30)
        await asyncio.to_thread(self._proc.join, 30)
        if self._proc.is_alive():
            self._proc.kill()
            await asyncio.to_thread(self._proc.join, 10)  # kill only sends the signal
        self._conn.close()
