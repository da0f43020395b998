"""Prefix trees over captured calls, and packing them for tree-aware training."""

from __future__ import annotations

from clawgym_env.tree.build import (
    PrefixTree,
    TreeFilters,
    build_forest,
    build_tree,
    classify_calls,
    load_calls,
)
from clawgym_env.tree.node import BRANCH_KINDS, BranchKind, CallInfo, CallRef, TreeNode
from clawgym_env.tree.pack import (
    NaiveBatch,
    PackedTree,
    pack_naive,
    pack_tree,
    pack_trees,
    tree_attention_mask,
    tree_mask_mod,
    unpack_logprobs,
)

__all__ = [
    "BRANCH_KINDS",
    "BranchKind",
    "CallInfo",
    "CallRef",
    "NaiveBatch",
    "PackedTree",
    "PrefixTree",
    "TreeFilters",
    "TreeNode",
    "build_forest",
    "build_tree",
    "classify_calls",
    "load_calls",
    "pack_naive",
    "pack_tree",
    "pack_trees",
    "tree_attention_mask",
    "tree_mask_mod",
    "unpack_logprobs",
]
