#!/usr/bin/env bash
# The test command (README, CI): set up, then run the default, docker and slow tiers.
#   bash scripts/test.sh          all three tiers (what CI runs; ~10 minutes of tests on 2 cores after setup)
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

status=0
run_tier "not docker and not slow and not gpu" || status=1
[ "${1:-}" = "quick" ] && exit $status
if bash scripts/docker-up.sh; then
  run_tier "docker and not gpu" || status=1
else
  echo "docker tier: dockerd could not be started (see above)"; status=1
fi
run_tier "slow and not docker and not gpu" || status=1
exit $status
