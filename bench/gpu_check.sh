#!/usr/bin/env bash
# GPU check for the device machine: the parity suite over NCCL on CUDA, in under
# 5 minutes. Prints SKIP and exits 0 where there is no CUDA device.
#
#   bench/gpu_check.sh            # from the repository root, with the venv set up
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "SKIP: no CUDA device on this machine"
  exit 0
fi
"$PY" - <<'PY'
import torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")
PY
start=$(date +%s)
timeout 290 "$PY" -m pytest -q -p no:cacheprovider tests/gpu -rs
echo "gpu_check: $(( $(date +%s) - start )) s"
