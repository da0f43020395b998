"""`clawgym sandbox` commands: check the backends, run a command in a sandbox by hand."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Sandbox backends: check them, try them by hand.", no_args_is_help=True)


@app.command()
def doctor(
    clean: bool = typer.Option(
        False,
        "--clean",
        help="Also remove what runs killed without closing their sandboxes left "
        "(folders, tmpfs mounts, cgroups, containers); never a live run's.",
    ),
) -> None:
    """Show which sandbox backends work on this machine, why not, and the fix."""
    from rich.console import Console
    from rich.table import Table

    from clawgym_env.sandbox.doctor import clean as clean_leftovers
    from clawgym_env.sandbox.doctor import doctor as run_checks
    from clawgym_env.sandbox.doctor import usable_backends

    if clean:
        removed = clean_leftovers()
        Console().print("removed: " + ", ".join(f"{n} {what}" for what, n in removed.items()))
    checks = run_checks()
    table = Table(title="clawgym sandbox doctor")
    for col in ("backend", "check", "status", "detail", "fix"):
        table.add_column(col, overflow="fold")
    style = {"ok": "green", "warn": "yellow", "fail": "red"}
    for c in checks:
        table.add_row(c.backend, c.item, f"[{style[c.status]}]{c.status}[/]", c.detail, c.fix)
    console = Console()
    console.print(table)
    usable = [b for b in usable_backends(checks) if b != "none"]
    console.print(f"usable backends: {', '.join(usable) if usable else 'NONE (see fixes above)'}")
    if not usable:
        raise typer.Exit(1)


@app.command(context_settings={"allow_interspersed_args": False})
def run(
    cmd: list[str] = typer.Argument(..., help="Command to run inside, after `--`."),
    backend: str = typer.Option("bwrap", help="bwrap | docker | none"),
    workspace: Path | None = typer.Option(None, help="Host folder that seeds the workspace (left untouched)."),
    workspace_mount: str = typer.Option("/workspace", help="Workspace path inside."),
    proxy_socket: Path | None = typer.Option(None, help="Host unix socket to forward to 127.0.0.1:PROXY_PORT inside."),
    proxy_port: int = typer.Option(8787),
    memory_mb: int | None = typer.Option(4096),
    pids: int | None = typer.Option(512),
    timeout: float | None = typer.Option(None, help="Wall-clock limit in seconds."),
    user: str = typer.Option("root", help="root | user (uid 1000 inside)"),
    download: Path | None = typer.Option(None, help="Copy the final workspace here afterwards."),
) -> None:
    """Run CMD in a fresh sandbox, stream its output, exit with its exit code.

    Example: clawgym sandbox run --workspace ./task -- sh -c 'ls; id'
    """
    import sys

    from rich.console import Console
    from rich.markup import escape

    from clawgym_env._sync import run_sync
    from clawgym_env.errors import ClawGymError
    from clawgym_env.sandbox import SandboxConfig, create_sandbox

    def echo(stream: str, data: bytes) -> None:
        out = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
        out.write(data)
        out.flush()

    async def go() -> int:
        async with create_sandbox(backend, config) as sb:
            r = await sb.exec(cmd, timeout=timeout, on_output=echo)
            if download is not None:
                await sb.download(workspace_mount, download)
        if r.timed_out or r.killed_by_limit:
            typer.echo(f"clawgym: killed ({r.killed_by_limit}) after {r.duration_s:.2f}s", err=True)
        return r.return_code

    try:
        config = SandboxConfig(
            workspace_src=workspace, workspace_mount=workspace_mount, proxy_socket=proxy_socket,
            proxy_port=proxy_port, memory_mb=memory_mb, pids=pids, user=user,
        )  # fmt: skip
        code = run_sync(go())
    except ClawGymError as exc:  # bad option, backend unknown or unusable here: one line, not a traceback
        Console(stderr=True).print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    raise typer.Exit(code if code >= 0 else 128 - code)
