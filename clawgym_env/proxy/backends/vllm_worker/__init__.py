"""Code that runs inside vLLM's own processes (its venv), not in ClawGym's.

``clawgym_vllm_worker.py`` is put on the server's PYTHONPATH by ``launch_vllm_server`` and named
with ``--worker-extension-cls``; it imports vLLM and torch only. Do not import it from ClawGym.
``clawgym_weight_group.py`` imports torch only: the trainer, the rollout child and the vLLM workers
all use it for ``--weight_sync broadcast``.
"""

from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parent
"""The folder to put on the vLLM server's PYTHONPATH."""
WORKER_EXTENSION = "clawgym_vllm_worker.WeightSync"
"""The ``--worker-extension-cls`` value."""
