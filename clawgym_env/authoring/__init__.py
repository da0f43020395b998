"""Tools for writing and vetting suites, never on an episode's path.

``await check_suite(suite)`` proves every task sound (its reference solution scores 1.0, doing nothing scores the
declared floor, and with ``adversarial`` strategies no gaming attempt scores above ``max_exploit_score``);
``importers`` turn third-party suites into ClawGym folders; ``adversarial`` holds the gaming strategies.
"""

from __future__ import annotations

from clawgym_env.authoring.check import CheckResult, check_suite

__all__ = ["CheckResult", "check_suite"]
