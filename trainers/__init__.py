"""Tree-aware RL through real agent harnesses: tree GRPO and tree PPO on TRL's configs.

Import what you use (heavy modules load torch/TRL): ``trainers.tree_grpo.config.TreeGRPOConfig``,
``trainers.tree_grpo.trainer.TreeGRPOTrainer``, ``trainers.tree_ppo.config.TreePPOConfig``,
``trainers.tree_ppo.trainer.TreePPOTrainer``, ``trainers.rollout.collect``, ``trainers.core.losses``.
Scripts: ``trainers/scripts/{train_grpo,train_ppo,demo_cpu}.py``; see ``trainers/README.md``.
"""
