"""The text accelbench submits for a Slurm round, whole, as tests/test_slurm_scripts.py plans it: the sbatch argv
as one shell line, job.sbatch and node.sh (this machine's interpreter, code digest and process named). The 2x1
job's master port is auto: its batch script chooses it on the job's first node and every node script reads it;
the 2x2 job's is the cluster file's 29500."""

EXPECTED_2X1 = r"""$ sbatch --parsable --job-name=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x1-r1 --nodes=2 --ntasks-per-node=1 --partition=debug --time=01:00:00 --no-requeue '--chdir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1' '--output=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm-%j.out' --exclusive '--comment=x; touch m $(id) `id`' '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/job.sbatch'
--- /shared/bench's dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/job.sbatch
#!/bin/bash
# accelbench: gpt2_tiny:torch:cpu:2:1 round 1; written by accelbench, every value from the plan quoted
set -u
address_of() { scontrol show node -o "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
master_addr=$(address_of "$first")
export ACCELBENCH_MASTER_ADDR="${master_addr:-$first}"
master_port=$(PYTHON '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST/training/contract/ports.py')
case "$master_port" in ""|*[!0-9]*) echo "accelbench: no master port could be chosen on $first" >&2; exit 3 ;; esac
export ACCELBENCH_MASTER_PORT="$master_port"
mkdir -p '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank0' && printf '%s\n' "$master_port" > '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank0/master_port'
exec srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 /bin/bash '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/node.sh'
--- /shared/bench's dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/node.sh
#!/bin/bash
# One task per node: the launcher of the node SLURM_NODEID names, its exit code kept beside its logs.
set -u
address_of() { scontrol show node -o "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }
master_addr=$ACCELBENCH_MASTER_ADDR
master_port=$ACCELBENCH_MASTER_PORT
node_addr=$(address_of "$SLURMD_NODENAME")
node_addr=${node_addr:-$(hostname)}
monitor=()
case "$SLURM_NODEID" in
  0)
    dir='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank0'
    export ACCELBENCH_NODE_RANK=0
    export ACCELBENCH_ORCHESTRATOR=ORCHESTRATOR
    export ACCELBENCH_RUN_ID=20250101-000000-abcd
    export ACCELBENCH_VENDOR_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST/vendors/cpu'
    export PYTHONPATH='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST'
    export PYTHONUNBUFFERED=1
    export TMPDIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank0/tmp'
    export TORCHINDUCTOR_CACHE_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/cache/torchinductor'
    launcher=(PYTHON -m torch.distributed.run --nnodes=2 --nproc-per-node=1 --node-rank=0 --master-addr="$master_addr" --master-port="$master_port" --local-addr="$node_addr" --max-restarts=0 --monitor-interval=0.25 '--log-dir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank0/torchrun' --redirects=3 -m training.run_pretraining --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/config.json')
    monitor=(PYTHON -m training.monitor --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/config.json' --interval 1 --out '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank0/monitor')
    ;;
  1)
    dir='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank1'
    export ACCELBENCH_NODE_RANK=1
    export ACCELBENCH_ORCHESTRATOR=ORCHESTRATOR
    export ACCELBENCH_RUN_ID=20250101-000000-abcd
    export ACCELBENCH_VENDOR_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST/vendors/cpu'
    export PYTHONPATH='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST'
    export PYTHONUNBUFFERED=1
    export TMPDIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank1/tmp'
    export TORCHINDUCTOR_CACHE_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/cache/torchinductor'
    launcher=(PYTHON -m torch.distributed.run --nnodes=2 --nproc-per-node=1 --node-rank=1 --master-addr="$master_addr" --master-port="$master_port" --local-addr="$node_addr" --max-restarts=0 --monitor-interval=0.25 '--log-dir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank1/torchrun' --redirects=3 -m training.run_pretraining --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/config.json')
    monitor=(PYTHON -m training.monitor --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/config.json' --interval 1 --out '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank1/monitor')
    ;;
  *) echo "accelbench: the plan has no node $SLURM_NODEID" >&2; exit 2 ;;
esac
mkdir -p "$dir/tmp"
printf '%s %s %s\n' "$SLURMD_NODENAME" "$node_addr" "$SLURM_JOB_ID" > "$dir/slurm_node.txt"
mon=""
if [ ${#monitor[@]} -gt 0 ]; then "${monitor[@]}" > "$dir/monitor.log" 2>&1 & mon=$!; fi
"${launcher[@]}" > "$dir/launcher.log" 2>&1 &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM INT HUP
wait "$child"; code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
echo "$code" > "$dir/exit_code.tmp" && mv "$dir/exit_code.tmp" "$dir/exit_code"
if [ -n "$mon" ]; then kill -TERM "$mon" 2>/dev/null; wait "$mon"; fi
exit "$code"
"""

EXPECTED_2X2 = r"""$ sbatch --parsable --job-name=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x2-r1 --nodes=2 --ntasks-per-node=1 --partition=debug --time=30 --no-requeue '--chdir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1' '--output=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm-%j.out' --account=bench --qos=high --gres=gpu:2 '--constraint=a100&ib' '--exclude=n[3-4]' '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/job.sbatch'
--- /shared/bench's dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/job.sbatch
#!/bin/bash
# accelbench: gpt2_tiny:torch:cpu:2:2 round 1; written by accelbench, every value from the plan quoted
set -u
address_of() { scontrol show node -o "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
master_addr=$(address_of "$first")
export ACCELBENCH_MASTER_ADDR="${master_addr:-$first}"
exec srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 /bin/bash '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/node.sh'
--- /shared/bench's dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/node.sh
#!/bin/bash
# One task per node: the launcher of the node SLURM_NODEID names, its exit code kept beside its logs.
set -u
address_of() { scontrol show node -o "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }
master_addr=$ACCELBENCH_MASTER_ADDR
node_addr=$(address_of "$SLURMD_NODENAME")
node_addr=${node_addr:-$(hostname)}
monitor=()
case "$SLURM_NODEID" in
  0)
    dir='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank0'
    export ACCELBENCH_NODE_RANK=0
    export ACCELBENCH_ORCHESTRATOR=ORCHESTRATOR
    export ACCELBENCH_RUN_ID=20250101-000000-abcd
    export ACCELBENCH_VENDOR_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST/vendors/cpu'
    export PYTHONPATH='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST'
    export PYTHONUNBUFFERED=1
    export TMPDIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank0/tmp'
    export TORCHINDUCTOR_CACHE_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/cache/torchinductor'
    launcher=(PYTHON -m torch.distributed.run --nnodes=2 --nproc-per-node=2 --node-rank=0 --master-addr="$master_addr" --master-port=29500 --local-addr="$node_addr" --max-restarts=0 --monitor-interval=0.25 '--log-dir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank0/torchrun' --redirects=3 -m training.run_pretraining --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/config.json')
    monitor=(PYTHON -m training.monitor --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/config.json' --interval 1 --out '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank0/monitor')
    ;;
  1)
    dir='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank1'
    export ACCELBENCH_NODE_RANK=1
    export ACCELBENCH_ORCHESTRATOR=ORCHESTRATOR
    export ACCELBENCH_RUN_ID=20250101-000000-abcd
    export ACCELBENCH_VENDOR_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST/vendors/cpu'
    export PYTHONPATH='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST'
    export PYTHONUNBUFFERED=1
    export TMPDIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank1/tmp'
    export TORCHINDUCTOR_CACHE_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/cache/torchinductor'
    launcher=(PYTHON -m torch.distributed.run --nnodes=2 --nproc-per-node=2 --node-rank=1 --master-addr="$master_addr" --master-port=29500 --local-addr="$node_addr" --max-restarts=0 --monitor-interval=0.25 '--log-dir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank1/torchrun' --redirects=3 -m training.run_pretraining --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/config.json')
    monitor=(PYTHON -m training.monitor --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/config.json' --interval 1 --out '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank1/monitor')
    ;;
  *) echo "accelbench: the plan has no node $SLURM_NODEID" >&2; exit 2 ;;
esac
mkdir -p "$dir/tmp"
printf '%s %s %s\n' "$SLURMD_NODENAME" "$node_addr" "$SLURM_JOB_ID" > "$dir/slurm_node.txt"
mon=""
if [ ${#monitor[@]} -gt 0 ]; then "${monitor[@]}" > "$dir/monitor.log" 2>&1 & mon=$!; fi
"${launcher[@]}" > "$dir/launcher.log" 2>&1 &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM INT HUP
wait "$child"; code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
echo "$code" > "$dir/exit_code.tmp" && mv "$dir/exit_code.tmp" "$dir/exit_code"
if [ -n "$mon" ]; then kill -TERM "$mon" 2>/dev/null; wait "$mon"; fi
exit "$code"
"""
