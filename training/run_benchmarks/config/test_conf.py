'''Test configs of FlagPerf's run.py (training/run_benchmarks/run.py), in FlagPerf's own shape.

accelbench reads this file without running it: plain assignments, a name of a key assigned above, and + of
strings; a call or an import is refused (exit 2). README, "FlagPerf's run.py", says what each key becomes.
Relative paths resolve against training/run_benchmarks/.
'''
# -*-coding:utf-8 -*-

# The vendor whose vendor.yaml declares each case's hardware (checked).
VENDOR = "cpu"

# Ignored: the container options are the vendor's (vendors/<vendor>/vendor.yaml).
ACCE_CONTAINER_OPT = ""
# The accelerator kind's visible-devices variable (checked; "" for the CPU, which has none).
ACCE_VISIBLE_DEVICE_ENV_NAME = ""

# Ignored: images are built from the vendor's Dockerfile.
PIP_SOURCE = "https://pypi.org/simple"

# Ignored (where FlagPerf is deployed on each host); named below.
FLAGPERF_PATH = "../.."
# The log root: each run's folder goes under it (here: the checkout's logs/, as accelbench's default).
FLAGPERF_LOG_PATH = FLAGPERF_PATH + "/logs"

# Accepted: debug, info, warning, error or critical.
FLAGPERF_LOG_LEVEL = 'info'

# Ignored: the vendor's container settings and the measured contention stand for these.
SHM_SIZE = "32G"
CLEAR_CACHES = False

# "model:framework_version:hardware:nnodes:nproc:repeat": the data folder (None: the case's own data).
CASES = {
    "gpt2_tiny:torch_2.13:cpu:1:2:1": None,
    # "gpt3_6.7B:paddle_2.5.1:A100:1:8:1": "/raid/dataset/gpt-3/",
}
