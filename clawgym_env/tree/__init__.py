"""Prefix trees over captured calls, and packing them for tree-aware training."""

from __future__ import annotations

from clawgym_env.tree.attention import TREE_ATTENTION, TreeBlocks, register_tree_attention, tree_attention
from clawgym_env.tree.build import (
    PrefixTree,
    TreeFilters,
    build_forest,
    build_tree,
    load_calls,
)
from clawgym_env.tree.classify import CallClass, classify_episode
from clawgym_env.tree.flex import TREE_FLEX, register_tree_flex
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
    "TREE_ATTENTION",
    "TREE_FLEX",
    "BranchKind",
    "CallClass",
    "CallInfo",
    "CallRef",
    "NaiveBatch",
    "PackedTree",
    "PrefixTree",
    "TreeBlocks",
    "TreeFilters",
    "TreeNode",
    "build_forest",
    "build_tree",
    "classify_episode",
    "load_calls",
    "pack_naive",
    "pack_tree",
    "pack_trees",
    "register_tree_attention",
    "register_tree_flex",
    "tree_attention",
    "tree_attention_mask",
    "tree_mask_mod",
    "unpack_logprobs",
]
