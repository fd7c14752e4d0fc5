#!/usr/bin/env bash
# docs/gpu-readiness.md's checklist in one command, for a lent single-GPU NVIDIA machine with no registry:
# its python3 already holds a CUDA torch; accelbench's own dependencies come as wheels in .whl/ (see the
# page for how they are fetched). Every step is bounded by `timeout` and runs even when one before failed,
# so one lease yields every figure it can. Full output and the run logs go to $OUT (or ./gpu-out).
#
#   bash benchmarks/gpu_checklist.sh [HARDWARE] [PART]   # HARDWARE: vendors/ name, default H100; PART 1, 2, all or fixes
# A part fits one 10-minute device call: 1 = peaks and the pretraining runs, 2 = compile and PPO; fixes = the
# runs that re-check what an earlier lease found wrong (the monitor's window, PPO's samples/s); lora = the torch
# half of the PaddleNLP-vs-Torch LoRA table's Llama-7b row (Paddle needs a CUDA paddle the lent machine lacks);
# breakdown = issue 33's device items that one GPU allows (calibrate, then gpt2_xl and gpt3_tiny with their step-time
# breakdown against it), then the machine's GEMM and memory figures; convergence = gpt3_tiny and gpt2_tiny in fp32
# and bf16 checked against the loss references recorded on a CPU (same tokens per step), and PPO's breakdown;
# multi = on a machine of two or more GPUs, the breakdown of DDP (plain and with a collective delay), ZeRO-2, TP2
# and PP2 against calibrate and the collective and sendrecv micro cases run there; mfu_table = issue 45: the mfu
# table's single-GPU rows (configs/sweeps/mfu_table_h100.yaml on HARDWARE: gpt2-1.5b and the 70B proxy, MP, MP +
# compile, MP + fp8) and the table beside the published figures (estimate ~4-5 minutes of device time; run it
# with CHECKLIST_BUDGET_S=470 in one call of at most 8 minutes: docs/gpu-readiness.md).
set -uo pipefail
cd "$(dirname "$0")/.."
hw=${1:-H100}
part=${2:-all}
export COLUMNS=200
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
exec > >(tee "$out/checklist-$part.log") 2>&1
export PYTHONUNBUFFERED=1

step() { printf '\n=== %s  [%s]\n' "$*" "$(date -u +%H:%M:%S)"; }
# CHECKLIST_BUDGET_S: the device call's own limit; each step is cut to what is left of it, less 45 s kept for the
# results at the end, and skipped when under 45 s remain, so a call that runs long still returns every figure.
budget=${CHECKLIST_BUDGET_S:-86400}
run() {
  local limit=$1 left=$(( budget - 45 - SECONDS )); shift
  step "$*"
  if (( left < 45 )); then echo "--- skipped: ${left} s left of the ${budget} s budget"; return; fi
  (( limit > left )) && limit=$left
  timeout -k 10 "$limit" "$@"; echo "--- rc=$?"
}

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
python3 -c 'import torch, sys; p = torch.cuda.get_device_properties(0); print(sys.version.split()[0], torch.__version__, torch.version.cuda, p.name, p.multi_processor_count, "SMs", p.total_memory >> 20, "MiB")'

step "install accelbench's dependencies from .whl/ (no registry here)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
for ao in "" .whl/alt/torchao-0.18*.whl .whl/alt/torchao-0.17*.whl .whl/alt/torchao-0.16*.whl; do
  [ -n "$ao" ] && python3 -m pip install -q --no-index --no-deps --force-reinstall "$ao"
  python3 -c 'import torchao.float8, torchao; print("torchao", torchao.__version__)' 2>&1 | tail -1 && break
done
accelbench --version

if [ "$part" = fixes ]; then
run 180 accelbench run "gpt2_xl:torch:$hw:1:1" --set train.steps=30 --set train.warmup_steps=10
run 240 accelbench run "ppo_gpt2_s:torch:$hw:1:1"
python3 - <<'PY'
import glob, json
for path in sorted(glob.glob("logs/*/*/round1/results.json")):
    doc = json.load(open(path))
    monitor, metrics = doc.get("monitor") or {}, doc.get("metrics") or {}
    figures = {f["name"]: f["value"] for f in doc.get("figures") or []}
    print(path, doc["status"], "window:", monitor.get("window"), "util %:", monitor.get("accel_util_mean"),
          "power W:", monitor.get("power_w_mean"), "tokens/J:", monitor.get("tokens_per_joule"),
          "samples/s:", metrics.get("samples_per_s"), "iteration samples/s:", figures.get("iteration.samples_per_s"))
PY
fi
if [ "$part" = lora ]; then
run 300 accelbench run "llama_7b_lora:torch:$hw:1:1" --extern_config_file config_TP1PP1SH0SP1BS4A10080Gx1x1 --set train.steps=30 --set train.warmup_steps=10
fi
if [ "$part" = multi ]; then  # two or more GPUs: issue 33's DDP case and the layouts never run on NCCL
n=$(nvidia-smi -L | wc -l)
run 60 accelbench calibrate "$hw" --dtype bf16
for op in allreduce allgather reducescatter; do run 90 accelbench run "$op:torch:$hw:1:$n"; done
run 90 accelbench run "sendrecv:torch:$hw:1:2"  # NCCL's point-to-point: PP2's sends are priced at it (2 ranks)
run 180 accelbench run "gpt2_xl:torch:$hw:1:$n" --set train.steps=30 --set train.warmup_steps=10
run 180 accelbench run "gpt2_xl:torch:$hw:1:$n" --set train.steps=30 --set train.warmup_steps=10 --set debug.collective_delay_ms=20
run 180 accelbench run "gpt2_xl:torch:$hw:1:$n" --set train.steps=30 --set train.warmup_steps=10 --set parallel.sharding=stage2
run 180 accelbench run "gpt2_xl:torch:$hw:1:$n" --set train.steps=30 --set train.warmup_steps=10 --set parallel.tensor_parallel_degree=2
run 180 accelbench run "gpt2_xl:torch:$hw:1:$n" --set train.steps=30 --set train.warmup_steps=10 --set parallel.pipeline_parallel_degree=2 --set train.gradient_accumulation_steps=4
fi
if [ "$part" = mfu_table ]; then  # issue 45: the published mfu table's single-GPU rows, then the table
run 420 accelbench sweep configs/sweeps/mfu_table_h100.yaml --grid "hardware=$hw"
accelbench table mfu --format markdown | tee "$out/mfu_table.md"
accelbench table mfu --format json > "$out/mfu_table.json"
python3 - <<'PY'
import glob, json
for path in sorted(glob.glob("logs/*/*/round1/results.json")):
    doc = json.load(open(path))
    m = doc.get("metrics") or {}
    print(path, doc["status"], doc.get("reason") or "", "TFLOP/s:", m.get("tflops_per_device"), "MFU:", m.get("mfu"),
          json.dumps(m.get("time_breakdown"), indent=1)[:2000])
PY
fi
if [ "$part" = convergence ]; then
for case in gpt3_tiny gpt2_tiny; do
  for precision in fp32 bf16; do
    run 90 accelbench run "$case:torch:$hw:1:1" --set train.micro_batch_size=16 --set train.steps=30 \
      --set train.warmup_steps=5 --set train.precision=$precision --check --no-reference-expected
  done
done
run 240 accelbench run "ppo_gpt2_s:torch:$hw:1:1"
fi
if [ "$part" = breakdown ]; then
run 150 accelbench calibrate "$hw" --dtype bf16 --dtype fp32 --dtype tf32 --dtype fp16
cat vendors/*/measured_peaks.yaml 2>/dev/null
run 180 accelbench run "gpt2_xl:torch:$hw:1:1" --set train.steps=30 --set train.warmup_steps=10
run 120 accelbench run "gpt3_tiny:torch:$hw:1:1" --set train.steps=50 --set train.warmup_steps=10 --set train.precision=bf16
run 240 accelbench run "gpt2_xl:torch:$hw:1:1" --set train.steps=30 --set train.warmup_steps=10 --set train.compile=default --set train.micro_batch_size=8
run 90 accelbench run "gemm:torch:$hw:1:1" --set "micro.shapes=[[8192,8192,8192],[16384,8192,8192]]" --set "micro.dtypes=[bf16,fp16]"
run 90 accelbench run "membw:torch:$hw:1:1" --set "micro.sizes_bytes=[268435456,2147483648]"
python3 - <<'PY'
import glob, json
for path in sorted(glob.glob("logs/*/*/round1/results.json")):
    doc = json.load(open(path))
    print(path, doc["status"], json.dumps((doc.get("metrics") or {}).get("time_breakdown"), indent=1)[:3000])
PY
fi
if [ "$part" != 2 ] && [ "$part" != fixes ] && [ "$part" != lora ] && [ "$part" != breakdown ] && [ "$part" != convergence ] && [ "$part" != multi ] && [ "$part" != mfu_table ]; then
run 120 accelbench calibrate "$hw" --dtype bf16 --dtype fp16 --dtype tf32 --dtype fp32 --dtype fp8
cat vendors/*/measured_peaks.yaml 2>/dev/null
run 120 accelbench run "gemm:torch:$hw:1:1" --set "micro.shapes=[[8192,8192,8192],[8192,12288,4096],[16384,8192,8192]]" --set "micro.dtypes=[bf16,fp16,fp32,tf32]"
run 120 accelbench run "membw:torch:$hw:1:1" --set "micro.sizes_bytes=[268435456,2147483648]"
run 120 accelbench run "gpt3_tiny:torch:$hw:1:1" --set train.steps=50 --set train.warmup_steps=10 --set train.precision=bf16
run 180 accelbench run "gpt2_xl:torch:$hw:1:1" --set train.steps=30 --set train.warmup_steps=10
run 180 accelbench run "gpt2_xl:torch:$hw:1:1" --set train.steps=30 --set train.warmup_steps=10 --set train.recompute=full
run 240 accelbench run "gpt2_tiny:torch:$hw:1:1" --set train.steps=40 --set train.warmup_steps=10 --set train.precision=fp8 --set train.compile=default
fi
if [ "$part" != 1 ] && [ "$part" != fixes ] && [ "$part" != lora ] && [ "$part" != breakdown ] && [ "$part" != convergence ] && [ "$part" != multi ] && [ "$part" != mfu_table ]; then
run 300 accelbench run "gpt2_xl:torch:$hw:1:1" --set train.steps=30 --set train.warmup_steps=10 --set train.compile=default
run 300 accelbench run "gpt2_xl:torch:$hw:1:1" --set train.steps=30 --set train.warmup_steps=10 --set train.compile=default --set train.micro_batch_size=8
run 240 accelbench run "ppo_gpt2_s:torch:$hw:1:1" --set train.micro_batch_size=1 --set ppo.experience_batch_size=1
run 240 accelbench run "ppo_gpt2_s:torch:$hw:1:1"
fi

step "paddle"
python3 -c 'import paddle' 2>&1 | tail -1

step "results"
accelbench runs
for id in $(accelbench runs 2>/dev/null | grep -oE '[0-9]{8}-[0-9]{6}-[0-9a-f]{4}' | sort -u); do
  accelbench show "$id"
done
accelbench report --format markdown $(accelbench runs 2>/dev/null | grep -oE '[0-9]{8}-[0-9]{6}-[0-9a-f]{4}' | sort -u) > "$out/report-$part.md" 2>&1
tar --exclude='cache' -czf "$out/logs-$part.tgz" logs vendors/*/measured_peaks.yaml 2>/dev/null
ls -la "$out"
