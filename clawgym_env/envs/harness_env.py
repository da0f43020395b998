"""ClawGymEnv: one unmodified harness episode as a Gymnasium environment, with inverted control.

The harness drives itself; the *model* is the agent. So an env step answers the harness's
pending model call: ``reset()`` starts a sandbox and the harness and returns its first model
request, ``step(action)`` returns the completion to the harness and yields its next request, or
the verifier's reward once the harness exits. The episode itself is ``run_episode`` (the same
machinery the benchmark runner and trainers use in served mode), fed by a ``QueueBackend``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import uuid
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from clawgym_env._sync import LoopThread
from clawgym_env.envs.queue_backend import PendingCall, QueueBackend
from clawgym_env.envs.spaces import UnicodeText, token_ids_space
from clawgym_env.episode import EpisodeResult, run_episode
from clawgym_env.errors import ConfigError, HarnessError
from clawgym_env.harness_registry import load_harness_class
from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend
from clawgym_env.proxy.backends.replay import ReplayBackend

__all__ = ["ClawGymEnv"]

Observation = dict[str, Any]
Action = str | dict[str, Any]
_TRUNCATING = ("timeout", "truncated")


class ClawGymEnv(gym.Env[Observation, Action]):
    """A real agent harness in a sandbox; each step is one of its model calls.

    Observation (a model request at the proxy boundary), a ``Dict`` with:
        ``messages``: the request's messages as JSON text (neutral, HF-chat-template shape:
        OpenAI-style ``tool_calls`` and ``role: "tool"``); ``tools``: its tools as JSON text;
        ``prompt_ids`` (only with a tokenizer): the exact prompt token ids the proxy rendered.
        JSON text, because Gymnasium spaces cannot describe free-form nested messages; the
        parsed request is also in ``info["request"]``. After the episode ends: empty lists.

    Action (the model's answer to that request), one of:
        ``str``: the completion text; Hermes ``<tool_call>{...}</tool_call>`` markup becomes tool
        calls (with a tokenizer the text is tokenized, ``token_source="tokenized"``);
        ``{"completion_ids": [...], "logprobs": [...]}``: sampled ids (needs a tokenizer);
        ``{"text": ..., "tool_calls": [{"name", "arguments"}], "reasoning": ...}``: a structured turn.

    Reward: 0 for every call, then the verifier's score in [0, 1] on the final step.
    ``terminated``: the harness exited (completed, crashed, or infrastructure error; see
    ``info["status"]``). ``truncated``: a budget ran out (task wall time or model-call limit).

    ``info`` always carries ``task_id``, ``session_id`` and ``status`` ("running" until the end);
    during the episode also ``call_index`` and ``request``; at the end ``score``, ``subscores``,
    ``capture`` (every ``CallRecord``), ``capture_path``, ``error``, ``harness_exit_code``,
    ``harness_output_tail``, ``timings`` and ``verifier_output``.

    ``close()`` is idempotent and leaves nothing behind (sandbox, processes, proxy, threads); the
    env also works as a context manager.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012 - gymnasium declares it this way

    def __init__(
        self,
        harness: str = "custom",
        suite: str = "clawgym-original",
        task: str | None = None,
        harness_version: str | None = None,
        sandbox: str = "bwrap",
        tokenizer: Any | None = None,
        capture_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        model_name: str = "policy",
        judge: PolicyBackend | None = None,
        harness_options: dict[str, Any] | None = None,
        render_mode: str | None = None,
    ) -> None:
        cls = load_harness_class(harness)
        if harness_version is not None and harness_version != cls.version:
            raise ConfigError(f"harness_version={harness_version!r}: {harness} is pinned to {cls.version}; pass that or None")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode={render_mode!r}: supported modes are {self.metadata['render_modes']}")
        from clawgym_env.task import load_suite

        self._suite = load_suite(suite)
        self._default_task = task
        if task is not None:
            self._suite.get(task.split("/", 1)[1] if task.startswith(f"{self._suite.name}/") else task)
        self._harness = cls(**(harness_options or {}))
        self._sandbox = sandbox
        self._tokenizer = _load_tokenizer(tokenizer)
        self._capture_dir = Path(capture_dir) if capture_dir is not None else None
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._model_name = model_name
        self._judge = judge
        self.render_mode = render_mode

        fields: dict[str, spaces.Space[Any]] = {"messages": UnicodeText(), "tools": UnicodeText()}
        if self._tokenizer is not None:
            fields["prompt_ids"] = token_ids_space(len(self._tokenizer))
        self.observation_space = spaces.Dict(fields)
        self.action_space = UnicodeText()

        self._lt: LoopThread | None = None
        self._proxy: Any = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._backend: QueueBackend | None = None
        self._task: asyncio.Task[EpisodeResult] | None = None
        self._pending: PendingCall | None = None
        self._info: dict[str, Any] = {}
        self._last_obs: Observation | None = None
        self._closed = False

    # ------------------------------------------------------------------ Gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Observation, dict[str, Any]]:
        """Start a fresh sandbox and harness on a task; return its first model request.

        ``options={"task": "<id>"}`` picks the task (an id in the suite, or ``"<suite>/<id>"``);
        otherwise the ``task`` kwarg, otherwise a task drawn with the env's seeded RNG. A
        running episode is aborted first.

        ``options={"replay": capture, "branch_at": k}`` branches a recorded episode of this task
        and harness at call k: calls 0..k-1 are answered from ``capture`` (a capture path or a
        list of ``CallRecord``) and the first observation is call k's request; ``info["replay"]``
        then holds the ``ReplayReport`` (``reached_branch``, ``divergence``: a request that
        stopped matching the recording hands control to you at that call instead). Raises ``HarnessExitError`` if the harness ends before
        making any model call (its status and output tail are in the message).
        """
        super().reset(seed=seed)
        if self._closed:
            raise ConfigError("reset() on a closed ClawGymEnv; create a new env")
        self._abort()
        opts = dict(options or {})
        spec = self._pick_task(opts.get("task"))
        lt = self._ensure_loop()
        self._backend = QueueBackend(self._tokenizer, self._model_name)
        serving: PolicyBackend = self._backend
        sid = f"{self._harness.name}-{uuid.uuid4().hex[:12]}"
        self._info = {"task_id": spec.full_id, "session_id": sid, "status": "running"}
        if "replay" in opts:
            serving = _replay_backend(opts["replay"], opts.get("branch_at"), self._backend)
            self._info["replay"] = serving.report
        self._task = lt.run(self._launch(spec, serving, sid))
        pending = lt.run(self._next_call())
        if pending is None:
            result = lt.run(self._finish())
            raise HarnessError(
                f"{self._harness.name} ended before its first model call: status={result.status}, "
                f"error={result.error}, output tail:\n{result.harness_output_tail[-1500:]}"
            )
        return self._observe(pending), dict(self._info)

    def step(self, action: Action) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Answer the pending model call with ``action``; return the next request or the reward."""
        if self._pending is None or self._lt is None:
            raise ConfigError("step() without a pending model call: call reset() first (or after the episode ended)")
        completion = self._to_completion(action)
        pending, self._pending = self._pending, None
        self._lt.loop.call_soon_threadsafe(_resolve, pending.future, completion)
        nxt = self._lt.run(self._next_call())
        if nxt is not None:
            return self._observe(nxt), 0.0, False, False, dict(self._info)
        result = self._lt.run(self._finish())
        obs = self._empty_obs()
        self._last_obs = obs
        truncated = result.status in _TRUNCATING
        return obs, float(result.score), not truncated, truncated, dict(self._info)

    def render(self) -> str | None:
        """``"ansi"``: the last message of the pending request, as text."""
        if self.render_mode != "ansi" or self._last_obs is None:
            return None
        messages = json.loads(self._last_obs["messages"])
        return json.dumps(messages[-1], indent=2, ensure_ascii=False) if messages else "(episode over)"

    def close(self) -> None:
        """Abort any running episode, stop the proxy and the loop thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._abort()
        if self._lt is not None:
            if self._proxy is not None:
                with contextlib.suppress(Exception):
                    self._lt.run(self._proxy.stop(), timeout=30)
            self._lt.close()
        if self._tmp is not None:
            self._tmp.cleanup()
        self._lt = self._proxy = self._tmp = None

    # ------------------------------------------------------------------ internals
    def _pick_task(self, wanted: str | None) -> Any:
        wanted = wanted or self._default_task
        if wanted is None:
            tasks = self._suite.tasks
            return tasks[int(self.np_random.integers(len(tasks)))]
        prefix = f"{self._suite.name}/"
        if "/" in wanted and not wanted.startswith(prefix):
            from clawgym_env.task import TaskRegistry

            return TaskRegistry.default().get(wanted)
        return self._suite.get(wanted.removeprefix(prefix))

    def _ensure_loop(self) -> LoopThread:
        if self._lt is None:
            from clawgym_env.proxy import ProxyServer
            from clawgym_env.sandbox._sweep import tagged_tempdir

            self._lt = LoopThread()
            self._tmp = tagged_tempdir("env")
            self._proxy = ProxyServer(uds_path=Path(self._tmp.name) / "proxy.sock")
            self._lt.run(self._proxy.start(), timeout=60)
        return self._lt

    async def _launch(self, spec: Any, backend: PolicyBackend, sid: str) -> asyncio.Task[EpisodeResult]:
        return asyncio.ensure_future(
            run_episode(
                spec,
                self._harness,
                backend,
                proxy=self._proxy,
                sandbox=self._sandbox,
                capture_dir=self._capture_dir,
                cache_dir=self._cache_dir,
                judge=self._judge,
                session_id=sid,
                model_name=self._model_name,
            )
        )

    async def _next_call(self) -> PendingCall | None:
        """The harness's next live model call, or None once the episode has finished."""
        assert self._backend is not None and self._task is not None
        while True:
            get = asyncio.ensure_future(self._backend.queue.get())
            await asyncio.wait({get, self._task}, return_when=asyncio.FIRST_COMPLETED)
            if not get.done():
                get.cancel()
                return None
            pending = get.result()
            if not pending.future.done():  # skip calls the harness abandoned (connection dropped)
                self._pending = pending
                return pending

    async def _finish(self) -> EpisodeResult:
        assert self._task is not None
        result = await self._task
        self._task = None
        self._info.update(
            status=result.status,
            score=result.score,
            subscores=result.subscores,
            capture=result.calls,
            capture_path=str(result.capture_path) if result.capture_path else None,
            error=result.error,
            harness_exit_code=result.harness_exit_code,
            harness_output_tail=result.harness_output_tail,
            timings=result.timings,
            verifier_output=result.verifier_output,
            splice_hit_rate=result.splice_hit_rate,
            egress_attempts=result.egress_attempts,
        )
        self._info.pop("request", None)
        self._info.pop("call_index", None)
        return result

    def _abort(self) -> None:
        """Cancel a running episode and wait for its cleanup (sandbox closed, session closed)."""
        task, self._task, self._pending = self._task, None, None
        if task is None or self._lt is None:
            return

        async def cancel() -> None:
            if self._backend is not None:
                await self._backend.aclose()
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

        with contextlib.suppress(FutureTimeout):
            self._lt.run(cancel(), timeout=60)

    def _observe(self, pending: PendingCall) -> Observation:
        req = pending.request
        obs: Observation = {"messages": json.dumps(req.messages, ensure_ascii=False), "tools": json.dumps(req.tools, ensure_ascii=False)}
        if self._tokenizer is not None:
            obs["prompt_ids"] = tuple(int(i) for i in (req.prompt_ids or ()))
        self._info.update(call_index=req.call_index, request=_request_info(req))
        self._last_obs = obs
        return obs

    def _empty_obs(self) -> Observation:
        obs: Observation = {"messages": "[]", "tools": "[]"}
        if self._tokenizer is not None:
            obs["prompt_ids"] = ()
        return obs

    def _to_completion(self, action: Action) -> Completion:
        tok = self._tokenizer
        if isinstance(action, str):
            if tok is None:
                return Completion(completion_ids=None, logprobs=None, text=action, token_source="none")
            ids = list(tok.encode(action, add_special_tokens=False))
            if tok.eos_token_id is not None:
                ids.append(int(tok.eos_token_id))
            return Completion(completion_ids=ids, logprobs=None, text=action, token_source="tokenized")
        if not isinstance(action, dict):
            raise ConfigError(f"step(action): expected str or dict, got {type(action).__name__}")
        if "completion_ids" in action:
            if tok is None:
                raise ConfigError("step({'completion_ids': ...}) needs a tokenizer: gym.make(..., tokenizer=...)")
            ids = [int(i) for i in action["completion_ids"]]
            logprobs = action.get("logprobs")
            if logprobs is not None and len(logprobs) != len(ids):
                raise ConfigError(f"step(action): {len(logprobs)} logprobs for {len(ids)} completion_ids")
            return Completion(
                completion_ids=ids,
                logprobs=[float(x) for x in logprobs] if logprobs is not None else None,
                finish_reason=str(action.get("finish_reason", "stop")),
                token_source="sampled",
                policy_version=action.get("policy_version"),
            )
        unknown = set(action) - {"text", "tool_calls", "reasoning"}
        if unknown:
            raise ConfigError(f"step(action): unknown keys {sorted(unknown)}; use completion_ids/logprobs or text/tool_calls/reasoning")
        structured = {
            "content": action.get("text") or "",
            "reasoning_content": action.get("reasoning") or "",
            "tool_calls": list(action.get("tool_calls") or []),
        }
        return Completion(completion_ids=None, logprobs=None, text=action.get("text") or "", structured=structured, token_source="none")

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _replay_backend(capture: Any, branch_at: Any, policy: QueueBackend) -> ReplayBackend:
    """``reset(options={"replay": ..., "branch_at": k})``: the recorded calls, checked, around the queue."""
    from clawgym_env.tree.build import load_calls

    if not isinstance(branch_at, int) or isinstance(branch_at, bool):
        raise ConfigError(f"reset(options={{'replay': ...}}) needs an int 'branch_at' (the call to branch at), got {branch_at!r}")
    calls = load_calls(capture) if isinstance(capture, (str, Path)) else list(capture)
    return ReplayBackend(calls, branch_at, policy)


def _resolve(future: asyncio.Future[Completion], completion: Completion) -> None:
    if not future.done():
        future.set_result(completion)


def _request_info(req: CompletionRequest) -> dict[str, Any]:
    return {
        "messages": req.messages,
        "tools": req.tools,
        "max_tokens": req.max_tokens,
        "temperature": req.temperature,
        "dialect": req.dialect,
    }


def _load_tokenizer(tokenizer: Any | None) -> Any | None:
    if tokenizer is None or not isinstance(tokenizer, (str, Path)):
        return tokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer))
