#!/usr/bin/env bash
# The test command (README, CI): set up, then run the default tier and the docker tier.
#   bash scripts/test.sh          default + docker tiers (what CI runs)
#   bash scripts/test.sh slow     the slow tier as well
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

status=0
run_tier "not docker and not slow and not gpu" || status=1
if bash scripts/docker-up.sh; then
  run_tier "docker and not slow" || status=1
else
  echo "docker tier: dockerd could not be started (see above)"; status=1
fi
if [ "${1:-}" = "slow" ]; then run_tier "slow and not gpu" || status=1; fi
exit $status
