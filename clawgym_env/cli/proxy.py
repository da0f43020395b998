"""`clawgym proxy` commands: serve a policy by hand, inspect a capture."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Serve a policy at the model boundary; inspect captures.", no_args_is_help=True)


def _fail(message: object) -> typer.Exit:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(f"[red]error:[/] {escape(str(message))}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


@app.command()
def serve(
    model: str = typer.Option("default", "--model", "-m", help="Policy spec, e.g. hf:tiny, vllm:URL, scripted:FILE."),
    host: str = typer.Option("127.0.0.1", help="TCP host to listen on."),
    port: int = typer.Option(8765, help="TCP port (0: any free port)."),
    uds: Path | None = typer.Option(None, help="Also listen on this unix socket."),
    api_key: str | None = typer.Option(None, "--api-key", help="Fix the session key (default: a fresh secret)."),
    capture: Path | None = typer.Option(None, help="Append every call to this JSONL capture file."),
    max_calls: int | None = typer.Option(None, help="Refuse calls after this many."),
    model_name: str = typer.Option("policy", help="Model name listed by /v1/models."),
) -> None:
    """Serve one session until Ctrl-C; prints the base URLs and key to give a harness."""
    import asyncio

    from clawgym_env._sync import run_sync
    from clawgym_env.proxy import ProxyServer
    from clawgym_env.proxy.backends.factory import backend_from_spec

    async def main() -> None:
        backend = backend_from_spec(model)
        async with ProxyServer(host=host, port=port, uds_path=uds) as server:
            sess = server.open_session(backend, capture_path=capture, max_calls=max_calls, model_name=model_name, api_key=api_key)
            typer.echo(f"serving {model} ({'token-level' if backend.TOKEN_LEVEL else 'message-level'})")
            typer.echo(f"  ANTHROPIC_BASE_URL={server.url}")
            typer.echo(f"  OPENAI_BASE_URL={server.url}/v1")
            if server.uds_path:
                typer.echo(f"  unix socket: {server.uds_path}")
            typer.echo(f"  API key: {sess.api_key}")
            stop = asyncio.Event()
            import signal

            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            try:
                await stop.wait()
            finally:
                calls = await server.close_session(sess.session_id)
                await backend.aclose()
                typer.echo(f"served {len(calls)} calls; splice hit rate {sess.splice_hit_rate:.1%}")

    from clawgym_env.errors import ClawGymError

    try:
        run_sync(main())
    except KeyboardInterrupt:
        pass
    except ClawGymError as exc:
        raise _fail(exc) from None
    except OSError as exc:  # the port or socket path is taken or not ours
        where = f"{host}:{port}" + (f" or {uds}" if uds else "")
        raise _fail(
            f"cannot listen on {where}: {exc.strerror or exc}. Fix: pick another --port (0: any free port)"
            + (" or --uds path" if uds else "")
            + "."
        ) from None


@app.command()
def inspect(path: Path = typer.Argument(..., help="A capture JSONL file.")) -> None:
    """One line per captured call: status, dialect, token counts, TITO reuse, finish reason."""
    from clawgym_env.capture import read_capture
    from clawgym_env.errors import ClawGymError

    try:
        records = read_capture(path)
    except ClawGymError as exc:
        raise _fail(exc) from None
    prompt = reused = 0
    for r in records:
        n_prompt = len(r.prompt_ids or ())
        prompt += n_prompt
        reused += r.reused_prompt_tokens
        typer.echo(
            f"{r.call_index:4d} {r.status} {r.dialect:17s} prompt={n_prompt:6d} reused={r.reused_prompt_tokens:6d} "
            f"completion={len(r.completion_ids or ()):5d} {r.finish_reason:10s} {r.latency_s * 1e3:8.1f} ms"
            + (f"  error: {r.error}" if r.error else "")
        )
    rate = f"{reused / prompt:.1%}" if prompt else "n/a (no token ids)"
    typer.echo(f"{len(records)} calls; splice hit rate {rate}")
