"""One string names a policy: ``--model hf:./ckpt``, ``vllm:http://gpu:8000#qwen``, ``default`` ...

Backends are imported lazily, so naming a scripted or API policy never imports torch.
"""

from __future__ import annotations

import difflib
import json
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from clawgym_env.errors import ConfigError
from clawgym_env.proxy.backends.base import PolicyBackend

__all__ = ["SPEC_FORMS", "backend_from_spec"]

SPEC_FORMS = """\
  default | hf:smollm2           embedded SmolLM2-135M-Instruct (in-process transformers)
  default?adapter=PATH | hf:BASE?adapter=PATH
                                 BASE (smollm2, tiny, a model folder) with a LoRA adapter folder merged in
  hf:ADAPTER_PATH                a LoRA adapter folder on the base its adapter_config.json names
  hf:tiny                        tiny random Qwen3 test model
  hf:tiny-moe                    tiny random Qwen3-MoE test model (4 experts, top-2; its captures hold the routing)
  hf:PATH[?device=cuda&dtype=bfloat16&max_batch=16&seed=0&logprobs_mode=raw&num_threads=1&prefix_cache_mb=1024]
                                 a local Hugging Face model folder
  vllm:URL[#MODEL]               a running vLLM server (MODEL: served name; a local folder also gives the tokenizer)
  vllm:PATH                      start vLLM on PATH on a free port (its own env: scripts/vllm-up.sh or CLAWGYM_VLLM_BIN)
  openai:URL#MODEL               OpenAI-compatible Chat Completions API (evaluation only; key: $OPENAI_API_KEY)
  anthropic:URL#MODEL            Anthropic Messages API (evaluation only; key: $ANTHROPIC_API_KEY)
  scripted:FILE[?tokenizer=PATH|tiny]
                                 replies from a YAML/JSON script (tests, demos); with a tokenizer the
                                 replies are token ids (trainable captures, logprobs 0)"""

_SCHEMES = ("hf", "vllm", "openai", "anthropic", "scripted")
_HF_OPTIONS = {
    "device": str,
    "dtype": str,
    "max_batch": int,
    "seed": int,
    "logprobs_mode": str,
    "num_threads": int,
    "prefix_cache_mb": float,
    "prefix_block_tokens": int,
    "min_trunk_tokens": int,
    "adapter": str,
}


def _bad(spec: str, why: str) -> ConfigError:
    return ConfigError(f"--model {spec!r}: {why}. A policy spec is one of:\n{SPEC_FORMS}")


def backend_from_spec(
    spec: str,
    *,
    api_key: str | None = None,
    tokenizer_path: str | Path | None = None,
    timeout: float = 600.0,
    option: str = "--model",
    **hf_options: Any,
) -> PolicyBackend:
    """Build the backend a spec names (see ``SPEC_FORMS``); a bad spec raises ConfigError listing the forms.

    ``api_key`` overrides the environment key of API backends; ``tokenizer_path`` gives vLLM
    backends a local tokenizer; ``hf_options`` (device, dtype, max_batch, seed, logprobs_mode, num_threads)
    override options written in an ``hf:`` spec. ``option`` is the flag the spec came from, named in errors
    (``--judge`` for an LLM judge).
    """
    try:
        return _build(spec, api_key=api_key, tokenizer_path=tokenizer_path, timeout=timeout, hf_options=hf_options)
    except ConfigError as exc:
        if option == "--model":
            raise
        msg = str(exc)
        msg = option + msg[len("--model") :] if msg.startswith("--model ") else f"{option} {spec.strip()!r}: {msg}"
        raise ConfigError(msg) from None


def _build(
    spec: str, *, api_key: str | None, tokenizer_path: str | Path | None, timeout: float, hf_options: dict[str, Any]
) -> PolicyBackend:
    spec = spec.strip()
    if spec == "default" or spec.startswith("default?"):
        spec = "hf:smollm2" + spec[len("default") :]
    scheme, sep, rest = spec.partition(":")
    if not sep or scheme not in _SCHEMES:
        close = difflib.get_close_matches(scheme, _SCHEMES, n=1)
        hint = f" (did you mean {close[0]}:...?)" if close and sep else ""
        raise _bad(spec, f"unknown kind {scheme!r}{hint}" if sep else "missing the kind: prefix")
    if not rest:
        raise _bad(spec, f"nothing after {scheme}:")
    if scheme == "hf":
        return _hf(spec, rest, hf_options)
    if scheme == "vllm":
        return _vllm(spec, rest, api_key=api_key, tokenizer_path=tokenizer_path, timeout=timeout)
    if scheme in ("openai", "anthropic"):
        return _api(spec, scheme, rest, api_key=api_key, timeout=timeout)
    return _scripted(spec, rest, tokenizer_path)


def _scripted(spec: str, rest: str, tokenizer_path: str | Path | None) -> PolicyBackend:
    from clawgym_env.proxy.backends.scripted import ScriptedBackend

    target, _, query = rest.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True))
    if set(options) - {"tokenizer"}:
        raise _bad(spec, f"unknown scripted option(s) {sorted(set(options) - {'tokenizer'})} (known: tokenizer)")
    tok_path = options.get("tokenizer") or tokenizer_path
    tokenizer = None
    if tok_path:
        from transformers import AutoTokenizer

        if str(tok_path) == "tiny":
            from clawgym_env.models.testing import tiny_model_path

            tok_path = tiny_model_path()
        if not Path(tok_path).expanduser().is_dir():
            raise _bad(spec, f"tokenizer {tok_path} is not a folder")
        tokenizer = AutoTokenizer.from_pretrained(Path(tok_path).expanduser())
    return ScriptedBackend.from_file(Path(target).expanduser(), tokenizer=tokenizer)


def _hf(spec: str, rest: str, overrides: dict[str, Any]) -> PolicyBackend:
    target, _, query = rest.partition("?")
    options: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in _HF_OPTIONS:
            raise _bad(spec, f"unknown hf option {key!r} (known: {', '.join(_HF_OPTIONS)})")
        try:
            options[key] = _HF_OPTIONS[key](value)
        except ValueError as exc:
            raise _bad(spec, f"hf option {key}={value!r} is not a {_HF_OPTIONS[key].__name__}") from exc
    unknown = set(overrides) - set(_HF_OPTIONS)
    if unknown:
        raise ConfigError(f"backend_from_spec: unknown keyword(s) {sorted(unknown)}; known: {sorted(_HF_OPTIONS)}")
    options.update(overrides)
    if target == "smollm2":
        from clawgym_env.models.smollm2 import default_model_path

        path = default_model_path()
    elif target == "tiny":
        from clawgym_env.models.testing import tiny_model_path

        path = tiny_model_path()
    elif target == "tiny-moe":
        from clawgym_env.models.testing import tiny_moe_model_path

        path = tiny_moe_model_path()
    else:
        from clawgym_env.models.adapter import is_adapter

        path = Path(target).expanduser()
        if not (path / "config.json").is_file() and not is_adapter(path):
            raise _bad(
                spec, f"{path} is neither a Hugging Face model folder (no config.json) nor a LoRA adapter folder (no adapter_config.json)"
            )
    if "adapter" in options:
        from clawgym_env.models.adapter import ADAPTER_CONFIG

        adapter = Path(options["adapter"]).expanduser()
        if not (adapter / ADAPTER_CONFIG).is_file():
            raise _bad(spec, f"adapter {adapter} is not a LoRA adapter folder (no {ADAPTER_CONFIG})")
        options["adapter"] = adapter
    from clawgym_env.proxy.backends.hf import HFBackend

    return HFBackend(path, **options)


def _vllm(spec: str, rest: str, *, api_key: str | None, tokenizer_path: str | Path | None, timeout: float) -> PolicyBackend:
    from clawgym_env.proxy.backends.vllm import VLLMBackend
    from clawgym_env.proxy.backends.vllm_server import launch_vllm_server

    if rest.startswith(("http://", "https://")):
        url, _, model = rest.partition("#")
        model = model or _served_model(spec, url)
        if tokenizer_path is None and Path(model).expanduser().is_dir():
            tokenizer_path = Path(model).expanduser()
        return VLLMBackend(url, model, api_key=api_key, timeout=timeout, tokenizer_path=tokenizer_path)
    path = Path(rest).expanduser()
    if not (path / "config.json").is_file():
        raise _bad(spec, f"{path} is neither an http(s) URL nor a model folder with config.json")
    server = launch_vllm_server(path, _free_port(), served_model_name=str(path))
    try:
        server.wait_ready(timeout=max(timeout, 900.0))
    except Exception:
        server.stop()
        raise
    return VLLMBackend(server.base_url, str(path), api_key=api_key, timeout=timeout, tokenizer_path=tokenizer_path or path, server=server)


def _served_model(spec: str, url: str) -> str:
    """Ask the server which model it serves (``GET /v1/models``) when the spec does not say."""
    models_url = url.rstrip("/").removesuffix("/v1") + "/v1/models"
    try:
        with urllib.request.urlopen(models_url, timeout=10) as resp:
            data = json.loads(resp.read())
        return str(data["data"][0]["id"])
    except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError) as exc:
        if isinstance(exc, OSError) and not isinstance(exc, urllib.error.HTTPError):  # nothing answers: #MODEL won't help
            raise ConfigError(
                f"--model {spec!r}: no server answers at {models_url} ({exc}). Fix: start the vLLM "
                "server first (`vllm serve MODEL`), check the URL, or use vllm:PATH to launch one"
            ) from exc
        raise _bad(spec, f"could not read the served model from {models_url} ({exc}); add #MODEL") from exc


def _api(spec: str, scheme: str, rest: str, *, api_key: str | None, timeout: float) -> PolicyBackend:
    url, _, model = rest.partition("#")
    if not url.startswith(("http://", "https://")) or not model:
        raise _bad(spec, f"{scheme} needs a base URL and a model: {scheme}:https://host/v1#MODEL")
    if scheme == "openai":
        from clawgym_env.proxy.backends.passthrough import OpenAIPassthrough

        return OpenAIPassthrough(url, model, api_key or os.environ.get("OPENAI_API_KEY"), timeout=timeout)
    from clawgym_env.proxy.backends.passthrough import AnthropicPassthrough

    return AnthropicPassthrough(url, model, api_key or os.environ.get("ANTHROPIC_API_KEY"), timeout=timeout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
