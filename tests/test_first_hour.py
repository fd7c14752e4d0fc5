"""What a newcomer reads in the first hour, said plainly: compare's terminal row names the setting that differs,
times read as ``2,820 ms``, ``table finetune last`` finds the finetune, a CPU is not called a GPU, a CPU's MFU
footnote points at ``calibrate``, the Markdown report keeps the footnotes and names its run, other runs' workers
are one warning per run, the loss check lists only settings that can change the loss, and a framework the
vendor file does not declare is refused. Stores are filled as a run fills them (test_results.fill); all in
this process."""
from __future__ import annotations

import pytest

from run_benchmarks.backends import cleanup
from run_benchmarks.catalog.vendors import VendorRegistry
from run_benchmarks.results.checks import loss_check, loss_reference
from run_benchmarks.results.breakdown.words import changed_part
from run_benchmarks.results.checks.loss_reference import RunCurve

from .conftest import ROOT, write
from .test_finetune_table import doc as finetune_doc, store  # noqa: F401 - fixture
from .test_grouping import round_doc
from .test_loss_reference import as_attempt, curve, document as loss_document, reference_curve, spec
from .test_results import document, fill, metrics_for


def test_compare_in_the_terminal_names_the_differing_setting_and_both_sides_facts(tmp_path, accelbench):
    db = tmp_path / "results.db"
    fill(db, [round_doc("m4", 0.5, micro=4), round_doc("m8", 0.8, micro=8)])
    done = accelbench("compare", "m4", "m8", "--db", str(db), env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # the label column wraps
    assert "[differs: train.micro_batch_size 4/8]" in text  # was eaten as rich markup
    assert "micro batch 4/8" in text and "(micro batch 4," not in text  # not side A's alone


def test_a_breakdown_footnote_reads_its_times_in_milliseconds_as_written():
    line = changed_part({"measured": {"compute_s": 2.82, "communication_s": 0.01}},
                        {"measured": {"compute_s": 2.5, "communication_s": 0.06}})
    assert line.startswith("the step's compute changed most: 2,820 ms -> 2,500 ms (-320 ms; compute 2,820 -> 2,500")
    assert "e+0" not in line


def test_table_finetune_last_is_the_newest_run_holding_a_finetune(accelbench, store):  # noqa: F811
    fill(store, [finetune_doc("run-newer", "gpt3_tiny", "torch", 2, 0.5)])  # a pretraining run started since
    done = accelbench("table", "finetune", "last", "--db", store, "--format", "markdown")
    assert done.returncode == 0, done.stderr  # was exit 2: "no Paddle or Torch LoRA or full finetune"
    chosen = done.stdout.split("last: run ", 1)[1].split(",")[0]  # run-a and run-b started at one time
    assert chosen in ("run-a", "run-b") and f"finetune table: {chosen}" in done.stdout
    assert "the newest run holding rows of this table (1 newer run(s) hold none: run-newer)" in done.stdout
    assert accelbench("table", "finetune", "--db", store).returncode == 0  # no selection: the same
    named = accelbench("table", "finetune", "run-newer", "--db", store, "--format", "markdown")  # named: as asked
    assert named.returncode == 0 and "left out: 1 workload(s) of task pretrain" in named.stdout  # the source alone


def test_a_cpu_table_names_its_devices_and_where_they_ran(accelbench, store):  # noqa: F811
    """The source's column is its GPU count; ours counts devices, and a CPU twin's rows say they ran on cpu
    (never a GPU for what is not one)."""
    done = accelbench("table", "finetune", "run-a", "--db", store, "--format", "markdown")
    header = next(line for line in done.stdout.splitlines() if line.startswith("| model"))
    assert "| devices | batch | ran on |" in header and "GPU" not in header
    ours = [line for line in done.stdout.splitlines() if line.startswith("| llama_tiny")]
    assert ours and all(line.split(" | ")[4] == "cpu" for line in ours)


def test_a_cpus_mfu_footnote_points_at_calibrate_and_markdown_keeps_it_under_the_run_id(accelbench, tmp_path):
    peak, why = VendorRegistry(ROOT / "vendors").hardware["cpu"].peak_tflops("fp32")
    assert peak is None and "`accelbench calibrate cpu` measures one" in why and "vendor.yaml" not in why
    a100, _ = VendorRegistry(ROOT / "vendors").hardware["A100"].peak_tflops("fp32")
    assert a100 == 19.5  # a device with a datasheet keeps it
    db = tmp_path / "results.db"
    cpu = document("cpu-run", "gpt3_tiny", "torch", 0.5)
    cpu["metrics"] = metrics_for(0.5, peak=None, peak_note=why)
    fill(db, [cpu])
    for fmt in ("terminal", "markdown"):
        done = accelbench("report", "last", "--db", str(db), "--format", fmt)
        assert done.returncode == 0, done.stderr
        assert f"MFU n/a: {why}" in " ".join(done.stdout.split()), fmt  # the Markdown report dropped it
        assert "accelbench report: cpu-run" in done.stdout and "report: last" not in done.stdout
        assert "MFU against a measured peak: n/a" not in done.stdout  # said once, in the line above


def test_other_runs_workers_are_one_warning_per_run_with_its_id():
    owner = "host:4242:123"
    procs = [{"pid": 10, "run": "20261128-1", "owner": owner, "alive": True, "cmd": "python -m training.run"},
             {"pid": 11, "run": "", "owner": owner, "alive": True, "cmd": "torchrun ..."},
             {"pid": 12, "run": "", "owner": "", "alive": None, "cmd": "python -m training.monitor"}]
    lines = cleanup.describe("localhost", procs)
    assert len(lines) == 2 and "run , " not in " ".join(lines)
    assert "2 process(es) (run 20261128-1, still running from pid 4242 on host)" in lines[0]  # pids: show -v
    assert "1 process(es) (untagged" in lines[1] and "10, 11" not in " ".join(lines)


def test_the_loss_check_lists_only_settings_that_can_change_the_loss():
    ref = loss_reference.LossReferenceFile(curves=[reference_curve()])
    other = loss_document("run", curve(4), spec(9, breakdown_steps=0, warmup_steps=2, precision="bf16"))
    verdict = loss_check.check_run(RunCurve(as_attempt(other)), ref, "f")
    listed = "; ".join(verdict.differing)
    assert "train.precision: 'fp32' vs 'bf16'" in listed
    assert "breakdown_steps" not in listed and "warmup_steps" not in listed


def test_a_framework_the_vendor_file_does_not_declare_is_refused_naming_it(accelbench, root):
    vendor = root / "vendors/cpu/vendor.yaml"
    text = vendor.read_text()
    assert "  paddle:\n    env: {}\n" in text
    vendor.write_text(text.replace("  paddle:\n    env: {}\n", ""))
    done = accelbench("run", "gpt3_tiny:paddle:cpu:1:2", "--root", str(root), "--dry-run")
    assert done.returncode == 2
    assert (f"vendor cpu does not declare framework paddle ({vendor}: frameworks lists torch)" in done.stderr
            and "declare frameworks.paddle in" in done.stderr)
    assert accelbench("run", "gpt3_tiny:torch:cpu:1:2", "--root", str(root), "--dry-run").returncode == 0


@pytest.mark.parametrize("text, todo", [
    ("description: x   # TODO later\n", False),
    ("# memory_gib: TODO\ndescription: x\n", False),
    ("description: TODO one line\n", True),
    ("kinds: {k: {device_count: [{command: [TODO_SMI, --list]}]}}\n", True),
])
def test_vendor_check_counts_todo_in_values_not_in_comments(tmp_path, text, todo):
    from run_benchmarks.cli.vendor import _todos

    write(tmp_path / "acme/vendor.yaml", text)
    write(tmp_path / "acme/docker/torch_2.13/requirements.txt", "torch==2.13.0  # TODO pin the CUDA build\n")
    found = _todos(tmp_path / "acme")
    assert [f.problem.split(":")[0] for f in found] == (["line 1 still says TODO"] if todo else [])
