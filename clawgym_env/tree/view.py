"""Show a prefix tree: a rich Tree for the terminal and one self-contained HTML page.

Both views show the same facts: branch points, sampled (trainable) vs prompt tokens per node,
the calls ending at each node with their latency, branch kind, line of work, dead flag and the
classifier's evidence, and the headline count of tokens a per-call layout forwards against the
tree's unique tokens.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from clawgym_env.tree.build import PrefixTree
from clawgym_env.tree.node import CallInfo, TreeNode

__all__ = ["Decoder", "calls_table", "render_html", "render_rich", "summary_table"]

Decoder = Callable[[list[int]], str]
_COLORS = {"main": "green", "subagent": "cyan", "compaction": "magenta", "retry": "yellow", "foreign": "red"}
_PREVIEW = 12


def _preview(tokens: list[int], decode: Decoder | None) -> str:
    head = tokens[:_PREVIEW]
    text = decode(head) if decode else " ".join(map(str, head))
    text = text.replace("\n", "\\n")
    return text + (" …" if len(tokens) > _PREVIEW else "")


def _dead(tree: PrefixTree, node: TreeNode) -> bool:
    return bool(node.calls) and all(tree.calls[r].dead for r in node.calls if r in tree.calls)


def _call_line(info: CallInfo) -> str:
    flag = " dead" if info.dead else ""
    return (
        f"call {info.ref.episode_id}#{info.ref.call_index} [{info.kind}{flag}] {info.chain}: prompt {info.prompt_len} + "
        f"completion {info.completion_len}, {info.latency_s * 1000:.0f} ms, {info.finish_reason}: {info.evidence}"
    )


def summary_table(tree: PrefixTree) -> Table:
    """Headline counts, including the per-call/tree token ratio that tree training saves."""
    table = Table(title="prefix tree", show_header=False)
    for key, value in tree.stats().items():
        table.add_row(key, f"{value:.2f}" if isinstance(value, float) else str(value))
    for reason, items in sorted(tree.dropped.items()):
        table.add_row(f"dropped ({reason})", str(len(items)))
    for episode, kinds in tree.kind_counts.items():
        table.add_row(f"calls of {episode}", ", ".join(f"{n} {k}" for k, n in kinds.items()))
    return table


def calls_table(tree: PrefixTree) -> Table:
    """One row per call: kind, line of work, dead flag, token counts, latency and the classifier's evidence."""
    table = Table(title="calls")
    for col in ("episode", "call", "kind", "chain", "dead", "prompt", "completion", "latency ms", "finish", "evidence"):
        table.add_column(col)
    for info in sorted(tree.calls.values(), key=lambda i: (tree.rollout_index(i.ref.episode_id), i.ref.call_index)):
        table.add_row(
            info.ref.episode_id,
            str(info.ref.call_index),
            f"[{_COLORS[info.kind]}]{info.kind}[/]",
            info.chain,
            "yes" if info.dead else "",
            str(info.prompt_len),
            str(info.completion_len),
            f"{info.latency_s * 1000:.0f}",
            info.finish_reason,
            escape(info.evidence),
        )
    return table


def _label(tree: PrefixTree, node: TreeNode, decode: Decoder | None) -> str:
    sampled = node.num_sampled
    color = _COLORS[node.kind]
    parts = [
        f"[{color}]{node.kind}[/]",
        f"tokens {node.depth}..{node.end_depth} ({len(node)}: [bold]{sampled} sampled[/], {len(node) - sampled} prompt)",
    ]
    if len(node.children) > 1:
        parts.append(f"[bold red]branch x{len(node.children)}[/]")
    if _dead(tree, node):
        parts.append("[dim]dead[/]")
    parts.append(f"[dim]{escape(_preview(node.tokens, decode))}[/]")
    return "  ".join(parts)


def render_rich(tree: PrefixTree, decode: Decoder | None = None) -> Tree:
    """The tree as a rich Tree; each node lists the calls that end on it."""
    top = Tree(f"[bold]{len(tree.episodes)} episode(s), {len(tree.calls)} calls[/]")
    stack: list[tuple[TreeNode, Tree, bool]] = [(c, top, False) for c in reversed(_children(tree.root))]
    while stack:
        node, parent, spine = stack.pop()
        branch = parent.add(("[bold]⤷[/] " if spine else "") + _label(tree, node, decode))
        for ref in node.ends:
            if ref in tree.calls:
                branch.add(f"[dim]↳ {escape(_call_line(tree.calls[ref]))}[/]")
        kids = _children(node)
        inner = [c for c in kids if not c.is_leaf]
        if len(kids) > 1 and len(inner) == 1:
            # a spine (OpenClaw: one leaf per call off a growing history): leaves hang here and the
            # one continuing child is drawn at this level, marked ⤷, so depth does not grow per call
            stack.append((inner[0], parent, True))
            stack.extend((c, branch, False) for c in reversed(kids) if c.is_leaf)
        else:
            stack.extend((c, branch, False) for c in reversed(kids))
    return top


def _children(node: TreeNode) -> list[TreeNode]:
    return [node.children[k] for k in sorted(node.children)]


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
details{margin-left:1.2em;border-left:2px solid #ddd;padding-left:.5em}
summary{cursor:pointer;white-space:nowrap}
.kind{display:inline-block;min-width:6em;font-weight:600}
.main{color:#1a7f37}.subagent{color:#0969da}.compaction{color:#8250df}.retry{color:#9a6700}.foreign{color:#cf222e}
.bar{display:inline-block;height:.7em;background:#1a7f37;vertical-align:middle}
.pbar{display:inline-block;height:.7em;background:#bbb;vertical-align:middle}
.branch{color:#cf222e;font-weight:600}.dead{color:#888;text-decoration:line-through}
.call{color:#555;margin-left:1.6em;font-size:12px}.ids{color:#777;font-family:monospace;font-size:12px}
"""


def _html_one(tree: PrefixTree, node: TreeNode, decode: Decoder | None, scale: float, spine: bool, inner: str) -> str:
    sampled = node.num_sampled
    prompt = len(node) - sampled
    bits = [
        '<span class="branch">&#10551;</span>' if spine else "",
        f'<span class="kind {node.kind}">{node.kind}</span>',
        f"{node.depth}..{node.end_depth} ({len(node)} tok: <b>{sampled} sampled</b>, {prompt} prompt)",
        (
            f'<span class="bar" style="width:{max(1, sampled * scale):.0f}px"></span>'
            f'<span class="pbar" style="width:{max(1, prompt * scale):.0f}px"></span>'
        ),
    ]
    if len(node.children) > 1:
        bits.append(f'<span class="branch">branch &times;{len(node.children)}</span>')
    dead = _dead(tree, node)
    bits.append(f'<span class="ids{" dead" if dead else ""}">{html.escape(_preview(node.tokens, decode))}</span>')
    calls = "".join(f'<div class="call">&#8627; {html.escape(_call_line(tree.calls[r]))}</div>' for r in node.ends if r in tree.calls)
    return f"<details open><summary>{' '.join(b for b in bits if b)}</summary>{calls}{inner}</details>"


def _html_siblings(tree: PrefixTree, nodes: list[TreeNode], decode: Decoder | None, scale: float) -> str:
    """Nodes at one level; a spine's continuing child follows its parent at the same level (as in the terminal)."""
    out: list[str] = []
    for first in nodes:
        node: TreeNode | None = first
        spine = False
        while node is not None:
            kids = _children(node)
            inner = [c for c in kids if not c.is_leaf]
            nxt = inner[0] if len(kids) > 1 and len(inner) == 1 else None
            shown = [c for c in kids if c.is_leaf] if nxt is not None else kids
            out.append(_html_one(tree, node, decode, scale, spine, _html_siblings(tree, shown, decode, scale)))
            node, spine = nxt, True
    return "".join(out)


def render_html(tree: PrefixTree, title: str = "ClawGym trace", decode: Decoder | None = None) -> str:
    """One self-contained HTML page (inline CSS, no scripts, no network) of the tree."""
    stats = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{v:.2f}</td></tr>" if isinstance(v, float) else f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>"
        for k, v in tree.stats().items()
    )
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(x))}</td>"
            for x in (
                i.ref.episode_id,
                i.ref.call_index,
                i.kind,
                i.chain,
                "yes" if i.dead else "",
                i.prompt_len,
                i.completion_len,
                f"{i.latency_s * 1000:.0f}",
                i.finish_reason,
                i.evidence,
            )
        )
        + "</tr>"
        for i in sorted(tree.calls.values(), key=lambda i: (tree.rollout_index(i.ref.episode_id), i.ref.call_index))
    )
    longest = max((len(n) for n in tree.nodes()), default=1)
    scale = 300.0 / max(longest, 1)
    body = _html_siblings(tree, _children(tree.root), decode, scale)
    head = (
        "<tr><th>episode</th><th>call</th><th>kind</th><th>chain</th><th>dead</th><th>prompt</th><th>completion</th>"
        "<th>latency ms</th><th>finish</th><th>evidence</th></tr>"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{html.escape(title)}</h1><table>{stats}</table><h2>tree</h2>{body}"
        f"<h2>calls</h2><table>{head}{rows}</table></body></html>"
    )
