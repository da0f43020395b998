"""Tree GRPO through ``DetachedTrunkForward`` with a KL term: the trunk KV kept from pack to pack gives
the same losses, KL and weights as forwarding every pack's trunk afresh (real custom-harness rollouts,
tiny model), and the policy's kept trunk does not survive an optimizer step."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainers.conftest import make_config
from trainers.tree_grpo.trainer import TreeGRPOTrainer
from trainers.tree_sft.forward import DetachedTrunkForward, trunk_start

pytestmark = pytest.mark.sandbox


class KeptTrunkGRPO(DetachedTrunkForward, TreeGRPOTrainer):
    pass


class FreshTrunkGRPO(DetachedTrunkForward, TreeGRPOTrainer):
    """Every pack forwards its own trunk from the first token: what the kept trunk must equal."""

    def forward_logprobs(self, model: Any, pack: Any) -> torch.Tensor:
        self.forget_trunk(model)
        return super().forward_logprobs(model, pack)


def test_kept_trunk_equals_fresh_trunks_over_two_steps_with_kl(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    runs = []
    for cls in (KeptTrunkGRPO, FreshTrunkGRPO):
        t = cls(make_config(tmp_path / cls.__name__, beta=0.05, learning_rate=3e-3), tiny_path)
        assert all(trunk_start(s.pack, 256) > 0 for s in t.slots(real_batch)[0])  # packs with a trunk to keep
        steps = [t.train_step(copy.deepcopy(real_batch)) for _ in range(2)]
        runs.append((t, steps))
    (kept, kept_steps), (fresh, fresh_steps) = runs
    ref = kept.trunks[id(kept.ref_model)]
    assert ref.forwards == 1  # the reference model's trunk was forwarded once in two steps of 2 packs
    assert id(kept.accelerator.unwrap_model(kept.model)) not in kept.trunks  # dropped by the last optimizer step
    assert kept_steps[1]["kl"] > 0  # step 2 runs on moved weights: a stale policy trunk would show here
    for a, b in zip(kept_steps, fresh_steps, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-6) and a["kl"] == pytest.approx(b["kl"], abs=1e-7)
    for (name, pa), pb in zip(kept.model.named_parameters(), fresh.model.parameters(), strict=True):
        assert torch.allclose(pa, pb, atol=1e-6), name
