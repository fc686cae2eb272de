#!/usr/bin/env bash
# GPU check for the device machine: the parity suite and the scale strategies
# (per-block FSDP, HSDP, CPU offload) over NCCL on CUDA, then the DeepSpeed ZeRO
# tests in .venv-deepspeed where `make setup-deepspeed` built it; at most 9
# minutes (the part limits add up to 540 s, under the device's 600 s a command).
# Prints SKIP and exits 0 where there is no CUDA device.
#
#   bench/gpu_check.sh                 # from the repository root, with the venv set up
#   bench/gpu_check.sh -k scale        # extra arguments go to each of the three pytest runs
#
# A part whose tests the extra arguments all deselect (pytest's status 5) says so
# and does not fail the check; a run in which every part that ran selected no
# test fails (status 5): a `-k` that matches nothing checked nothing. In the
# DeepSpeed part a `-k` given here replaces its own `-k deepspeed`.
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
status=0
ran=0       # parts run
selected=0  # parts whose arguments selected at least one test
# The scale strategies first: the parity matrix (12 fixtures x 5 configurations,
# each an original run and a torchrun launch) is the slow part, and run first
# under one timeout it left no time for them. Each part has its own timeout.
part() {  # NAME SECONDS COMMAND...: run one part, say how it ended
  local name=$1 limit=$2 rc=0
  shift 2
  timeout "$limit" "$@" || rc=$?
  ran=$((ran + 1))
  if [ "$rc" -eq 5 ]; then  # pytest: no test selected
    echo "gpu_check: $name: the arguments select no test in this part"
    return 0
  fi
  selected=$((selected + 1))
  [ "$rc" -eq 124 ] && echo "gpu_check: $name stopped after its ${limit} s"
  [ "$rc" -eq 0 ] || status=$rc
}
part "scale and offload" 190 "$PY" -m pytest -q -p no:cacheprovider \
  tests/gpu/test_gpu_scale.py tests/gpu/test_gpu_offload.py tests/gpu/test_gpu_broadcast.py \
  -rs "$@"
DS=.venv-deepspeed/bin/python
if [ -x "$DS" ]; then
  part "DeepSpeed ZeRO" 130 "$DS" -m pytest -q -p no:cacheprovider \
    tests/gpu/test_gpu_scale.py -k deepspeed -rs "$@"
else
  echo "SKIP: DeepSpeed ZeRO on the GPU: no $DS (make setup-deepspeed)"
fi
part "parity" 220 "$PY" -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_parity.py -rs "$@"
if [ "$ran" -gt 0 ] && [ "$selected" -eq 0 ]; then
  echo "gpu_check: the arguments select no test in any part: nothing was checked"
  status=5
fi
echo "gpu_check: $(( $(date +%s) - start )) s, status $status"
exit $status
