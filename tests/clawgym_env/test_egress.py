"""Network attempts past the proxy: refused, and reported on the episode that made them."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from clawgym_env.episode import run_episode
from clawgym_env.proxy import ProxyServer, ScriptedBackend
from clawgym_env.proxy.egress import egress_env, egress_target, proxy_key

SMOKE = Path(__file__).parents[1] / "harnesses" / "tasks" / "h6-smoke" / "hello-file"


def test_targets_and_loopback_rewrite() -> None:
    assert egress_target("CONNECT", "play.googleapis.com:443") == ("play.googleapis.com:443", "play.googleapis.com:443")
    assert egress_target("GET", "http://example.com/x") == ("example.com:80", "http://example.com/x")
    assert egress_target("POST", "http://127.0.0.1:8787/v1/messages") == (None, "/v1/messages")
    assert egress_target("POST", "/v1/responses") == (None, "/v1/responses")
    env = egress_env("sk-1", 8787)
    assert env["HTTPS_PROXY"] == env["http_proxy"] == "http://clawgym:sk-1@127.0.0.1:8787"
    assert "127.0.0.1" in env["NO_PROXY"].split(",")
    assert proxy_key({b"proxy-authorization": b"Basic " + base64.b64encode(b"clawgym:sk-1")}) == "sk-1"
    assert proxy_key({b"proxy-authorization": b"Basic !!"}) is None and proxy_key({}) is None


async def test_proxy_refuses_and_attributes_an_https_tunnel(tmp_path: Path) -> None:
    async with ProxyServer(uds_path=tmp_path / "p.sock") as srv:
        sess = srv.open_session(ScriptedBackend(["x"]))
        proxy = f"http://clawgym:{sess.egress_key}@127.0.0.1:{srv.port}"
        async with httpx.AsyncClient(proxy=proxy) as c:
            with pytest.raises(httpx.ProxyError, match="403"):
                await c.get("https://telemetry.example.com/v1/log")
            r = await c.get("http://updates.example.com/latest")
        assert r.status_code == 403
        assert [e.path for e in sess.egress] == ["CONNECT telemetry.example.com:443", "GET updates.example.com:80"]
        assert sess.calls == []


@pytest.mark.sandbox
async def test_episode_reports_what_the_agent_tried_to_reach() -> None:
    """The custom loop's agent runs curl and python urllib in the sandbox: both attempts come back on the result,
    the task still completes and scores (reported, not silently allowed, never let through)."""
    script = (
        "curl -s -m 5 https://example.com/ || echo curl-blocked; "
        "python3 -c \"import urllib.request as u; u.urlopen('http://pypi.org/simple/', timeout=5)\" "
        "2>/dev/null || echo py-blocked; printf 'hello world\\n' > hello.txt"
    )
    backend = ScriptedBackend([{"tool_calls": [{"name": "bash", "arguments": {"command": script}}]}, "done"])
    result = await run_episode(str(SMOKE), "custom", backend)
    assert result.status == "completed" and result.score == 1.0, (result.error, result.harness_output_tail)
    assert result.egress_attempts == ["CONNECT example.com:443", "GET pypi.org:80"]
    tool_output = result.calls[1].messages[-1]["content"]
    assert "curl-blocked" in tool_output and "py-blocked" in tool_output
