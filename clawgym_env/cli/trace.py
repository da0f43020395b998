"""`clawgym trace`: look at captured episodes as prefix trees."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Inspect captured episodes as token prefix trees.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Inspect captured episodes as token prefix trees."""


@app.command()
def show(
    captures: Annotated[list[Path], typer.Argument(help="Capture JSONL file(s); several episodes of one task merge into one forest.")],
    html: Annotated[Path | None, typer.Option("--html", help="Also write a self-contained HTML view here.")] = None,
    drop_dead: Annotated[bool, typer.Option("--drop-dead", help="Leave out dead leaves (failed, retried, never continued).")] = False,
    exclude: Annotated[str, typer.Option("--exclude", help="Branch kinds to leave out, comma-separated (subagent,compaction).")] = "",
    foreign: Annotated[
        bool, typer.Option("--foreign/--no-foreign", help="Show calls no behaviour of the harness explains (training leaves them out).")
    ] = True,
    max_leaves: Annotated[int | None, typer.Option("--max-leaves", help="Leave out episodes with more leaves than this.")] = None,
    tokenizer: Annotated[str | None, typer.Option("--tokenizer", help="HF tokenizer folder to decode token previews.")] = None,
    calls: Annotated[bool, typer.Option("--calls/--no-calls", help="Print the per-call table.")] = True,
) -> None:
    """Print the tree: branch points, sampled vs prompt tokens, per-call latency, each call's kind and why."""
    from rich.console import Console

    from clawgym_env.errors import ClawGymError
    from clawgym_env.tree import TreeFilters, build_tree, load_calls
    from clawgym_env.tree.view import (
        calls_table,
        render_html,
        render_rich,
        summary_table,
    )

    console = Console()
    try:
        kinds = frozenset(k.strip() for k in exclude.split(",") if k.strip())
        filters = TreeFilters(
            drop_dead=drop_dead,
            exclude_kinds=kinds,  # type: ignore[arg-type]  # TreeFilters refuses an unknown kind by name
            max_leaves=max_leaves,
            keep_foreign=foreign,
        )
        records = [c for path in captures for c in load_calls(path)]
        tree = build_tree(records, filters=filters)
        decode = None
        if tokenizer:
            from transformers import AutoTokenizer

            try:
                tok = AutoTokenizer.from_pretrained(tokenizer)
            except (OSError, ValueError) as exc:
                raise ClawGymError(
                    f"--tokenizer {tokenizer}: cannot load a tokenizer there ({str(exc).splitlines()[0]}). "
                    "Fix: give a local Hugging Face model or tokenizer folder"
                ) from None

            def decode(ids: list[int]) -> str:
                return str(tok.decode(ids))
    except ClawGymError as exc:
        from rich.markup import escape

        Console(stderr=True).print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    console.print(summary_table(tree))
    no_ids = len(tree.dropped.get("no_token_ids", ()))
    if no_ids:
        console.print(
            f"[yellow]{no_ids} call(s) carry no token ids and are left out: they were served by a "
            "message-level backend (scripted:, openai:, anthropic:). Capture with a token-level "
            "backend (hf:, vllm:) to build a tree.[/]",
            highlight=False,
            soft_wrap=True,
        )
    console.print(render_rich(tree, decode))
    if calls:
        console.print(calls_table(tree))
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        title = ", ".join(p.name for p in captures)
        html.write_text(render_html(tree, title=f"trace: {title}", decode=decode), encoding="utf-8")
        console.print(f"wrote {html}")
