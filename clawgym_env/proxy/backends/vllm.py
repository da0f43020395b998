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

Weight sync: vLLM has no stable public "load these weights" endpoint. With
``VLLM_SERVER_DEV_MODE=1`` (set by ``launch_vllm_server``) it exposes ``POST /collective_rpc``,
``POST /reset_prefix_cache``, ``/sleep`` and ``/wake_up``. ``reload_weights(path)`` calls the
workers' ``update_config`` (to point ``model_config.model`` at ``path`` when it changed) and
``reload_weights`` through ``/collective_rpc``, then resets the prefix cache. This follows vLLM's
worker API of late 2025; it is checked here only against the fake-vLLM test server, so verify it
on your vLLM version (or restart the server on the new checkpoint) before relying on it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError, PolicyBackendError
from clawgym_env.proxy.backends._http import JSONClient
from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend

__all__ = ["VLLMBackend", "launch_vllm_server", "vllm_command", "wait_for_server"]


class VLLMBackend(PolicyBackend):
    """Token-in-token-out calls to a vLLM server's ``/v1/completions``."""

    TOKEN_LEVEL = True
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
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        self.base_url = base.removesuffix("/v1")
        self.model = model
        self.policy_version = policy_version
        self.process = process
        """The server process when we launched it; ``aclose`` terminates it."""
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else (Path(model) if Path(model).is_dir() else None)
        self._tokenizer: Any | None = None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = JSONClient(self.base_url, headers=headers, timeout=timeout)
        self._served_path: str | None = str(self._tokenizer_path) if self._tokenizer_path else None

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
        """Send the prompt ids; return the sampled ids, their logprobs and the finish reason."""
        version = self.policy_version
        data = await self._http.request("POST", "/v1/completions", self.request_body(request), what="vLLM server")
        return parse_completion(data, version)

    async def reload_weights(self, path: str | Path, version: int) -> None:
        """Make the server load the checkpoint at ``path`` (a folder it can read); see the module doc."""
        target = str(path)
        if target != self._served_path:
            await self._rpc("update_config", {"overrides": {"model_config": {"model": target}}})
        await self._rpc("reload_weights", {})
        await self._http.request("POST", "/reset_prefix_cache", None, what="vLLM server")
        self._served_path = target
        self.policy_version = version

    async def _rpc(self, method: str, kwargs: dict[str, Any]) -> Any:
        body = {"method": method, "args": [], "kwargs": kwargs}
        try:
            return await self._http.request("POST", "/collective_rpc", body, what="vLLM server")
        except PolicyBackendError as exc:
            if "HTTP 404" in str(exc):
                raise PolicyBackendError(
                    f"{self.base_url} has no /collective_rpc: start vLLM with VLLM_SERVER_DEV_MODE=1 "
                    "(launch_vllm_server does) to reload weights in place"
                ) from exc
            raise

    async def aclose(self) -> None:
        """Close the HTTP session and stop the server if we launched it. Idempotent."""
        await self._http.aclose()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                await asyncio.to_thread(self.process.wait, 30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                await asyncio.to_thread(self.process.wait)


def parse_completion(data: Any, version: int | None) -> Completion:
    """Read token ids, logprobs, text and finish reason from a vLLM completions response."""
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
    )


def vllm_command(
    model_path: str | Path,
    port: int,
    extra_args: Sequence[str] = (),
    *,
    host: str = "127.0.0.1",
    served_model_name: str | None = None,
    vllm_bin: str | None = None,
) -> list[str]:
    """The argv that serves ``model_path`` the way VLLMBackend expects.

    ``--logprobs-mode raw_logprobs``: logprobs of the raw model distribution (as HFBackend).
    ``--generation-config vllm``: ignore the model's generation_config.json sampling defaults
    (e.g. a top_k), so the request's temperature/top_p are the whole sampling policy.
    ``--enable-prefix-caching``: agent calls share long prefixes.
    """
    exe = vllm_bin or os.environ.get("CLAWGYM_VLLM_BIN") or "vllm"
    return [
        exe,
        "serve",
        str(model_path),
        "--host",
        host,
        "--port",
        str(port),
        "--served-model-name",
        served_model_name or str(model_path),
        "--logprobs-mode",
        "raw_logprobs",
        "--generation-config",
        "vllm",
        "--enable-prefix-caching",
        *extra_args,
    ]


def launch_vllm_server(
    model_path: str | Path,
    port: int,
    extra_args: Sequence[str] = (),
    *,
    host: str = "127.0.0.1",
    served_model_name: str | None = None,
    vllm_bin: str | None = None,
    log_path: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``vllm serve`` (GPU machines; vLLM lives in its own environment) and return the process.

    ``vllm_bin`` (or ``$CLAWGYM_VLLM_BIN``) is the ``vllm`` executable of that environment. The
    server gets ``VLLM_SERVER_DEV_MODE=1`` so ``VLLMBackend.reload_weights`` works. Its output goes
    to ``log_path`` (default: discarded). Call ``wait_for_server`` before sending requests.
    """
    argv = vllm_command(model_path, port, extra_args, host=host, served_model_name=served_model_name, vllm_bin=vllm_bin)
    if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
        raise ConfigError(
            f"cannot launch vLLM: {argv[0]!r} not found. Install vLLM in its own environment "
            "(`python -m venv ~/vllm && ~/vllm/bin/pip install vllm`) and set CLAWGYM_VLLM_BIN=~/vllm/bin/vllm"
        )
    env = dict(os.environ, VLLM_SERVER_DEV_MODE="1")
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
    return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for_server(base_url: str, timeout: float = 600.0, process: subprocess.Popen[bytes] | None = None) -> None:
    """Block until ``GET /health`` answers 200; fail early if ``process`` exits."""
    import urllib.error
    import urllib.request

    url = base_url.rstrip("/").removesuffix("/v1") + "/health"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise PolicyBackendError(f"vLLM server exited with code {process.returncode} before becoming ready")
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise PolicyBackendError(f"vLLM server at {url} not ready after {timeout} s")
