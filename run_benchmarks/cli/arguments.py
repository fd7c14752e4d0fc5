"""The ``accelbench`` command line: every command's arguments, and nothing a command does.

Building the parser imports only the standard library and a few names, so ``accelbench --help`` and
``accelbench list`` start fast (docs/benchmarks.md, "Harness overhead"): a command's module, and the
pydantic models, rich, YAML, SQLite, plotting and SSH code it needs, is imported when that command runs
(``main.COMMANDS``). tests/test_cli_imports.py holds that line. Over 300 lines: every command's arguments in one
stdlib-only module, so that building the parser is one import.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from training.contract.names import GEMM_DTYPES

from run_benchmarks import __version__
from run_benchmarks.catalog import casename
from run_benchmarks.cli.history_arguments import add_history
from run_benchmarks.cli.parser import ArgumentParser
from run_benchmarks.cli.exit_codes import EXIT_CONTENDED, EXIT_CONVERGENCE, EXIT_NOTHING_CHECKED, EXIT_REGRESSION
from run_benchmarks.results.report.formats import COMPARE_FORMATS, REPORT_FORMATS, SWEEP_FORMATS, TABLE_FORMATS
from run_benchmarks.results.store import location as store_location
from run_benchmarks.results.store.location import StoreLocation
from run_benchmarks.results.store.schema import FILTER_KEYS
from run_benchmarks.results.tables import NAMES as TABLE_NAMES

CALIBRATE = ("``accelbench calibrate HARDWARE``: run the GEMM micro-benchmark on this machine's device of that "
             "hardware and record the best TFLOP/s per dtype in the vendor's measured_peaks.yaml, which MFU is "
             "then also shown against.")


def db_argument(text: str) -> StoreLocation:
    """``--db``'s type: a file path or a URL accelbench serves; anything else refused by argparse (exit 2)."""
    try:
        return store_location.parse(text)
    except store_location.LocationError as exc:
        raise argparse.ArgumentTypeError(f"{exc.message}; fix: {exc.fix}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="accelbench",
        description="Benchmark AI training across vendors, frameworks and parallel layouts.",
        epilog=f"case names: {casename.FORMAT}, e.g. {casename.EXAMPLE}",
    )
    parser.add_argument("--version", action="version", version=f"accelbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = sub.add_parser("run", help="run cases and report their figures",
                         description="Run one or more cases; with none, run the cases listed in test_conf.",
                         epilog=f"case names: {casename.FORMAT}, e.g. {casename.EXAMPLE}")
    run.add_argument("case_names", nargs="*", metavar="CASE_NAME",
                     help=f"{casename.FORMAT}; several may be given (default: the cases in test_conf)")
    add_run_options(run)
    add_sweep(sub)
    add_store_commands(sub)
    add_calibrate(sub)
    vendor = sub.add_parser("vendor", help="onboard a vendor: scaffold one from the template, check one",
                            description="See docs/vendor-onboarding.md for the whole path.")
    vendor_sub = vendor.add_subparsers(dest="vendor_command", metavar="ACTION", required=True)
    new = vendor_sub.add_parser("new", help="copy vendors/template to vendors/NAME")
    new.add_argument("name", metavar="NAME")
    new.add_argument("--root", type=Path, help="checkout holding vendors/ (default: this one)")
    chk = vendor_sub.add_parser("check", help="validate vendors/NAME: schema, peaks, images, monitor, every "
                                              "extern config planned on its layout")
    chk.add_argument("names", nargs="*", metavar="NAME", help="vendors to check (default: all)")
    chk.add_argument("--root", type=Path, help="checkout holding cases/ and vendors/ (default: this one)")
    chk.add_argument("--run-tools", action="store_true", help="run the device-count and monitor commands the "
                     "vendor.yaml names (installed here) and show what is parsed; off by default: read them first")
    add_vendor_import(vendor_sub)
    cln = sub.add_parser("clean", help="end what runs whose orchestrator died left behind: processes, "
                                       "containers (their output saved first), Docker bridge folders",
                         description="Looks on every host of the cluster config. Only what carries the mark of "
                                     "an orchestrator that is provably dead (same machine, pid gone) is touched.")
    cln.add_argument("--cluster", type=Path, help="hosts (default: <root>/configs/cluster.yaml)")
    cln.add_argument("--test-conf", type=Path, help="run settings (default: <root>/configs/test_conf.yaml)")
    cln.add_argument("--root", type=Path, help="folder with cases/ and vendors/ (default: this checkout)")
    cln.add_argument("--docker-host", action="append", default=[], metavar="URL",
                     help="another Docker engine to sweep, e.g. unix:///var/run/docker.sock (repeatable)")
    lst = sub.add_parser("list", help="show known cases, vendors, hardware and frameworks",
                         description="Reads the names and the fields shown from each file (a YAML error names "
                                     "the file and line); --check validates every file against its schema.")
    lst.add_argument("--root", type=Path, help="folder with cases/ and vendors/ (default: this checkout)")
    lst.add_argument("--check", action="store_true", help="validate every case.yaml and vendor.yaml in full "
                     "(as a run does) before listing; exit 2 naming the first bad file and key")
    return parser


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--extern_config_file", "--extern-config", dest="extern_config", metavar="NAME",
                        help="vendor tuning for the case: a config name in vendors/<vendor>/<case>/<framework>/ "
                             "(e.g. config_TP1PP1SH2SP8A10080Gx1x8: its .yaml, or FlagPerf's .py read without "
                             "running it) or a path to either")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE",
                        help="override a workload key for every case, e.g. --set train.steps=10 (repeatable); "
                             "wins over the case, the extern config and test_conf")
    parser.add_argument("--dry-run", action="store_true", help="print the plan (per node: host, launcher argv, "
                                                               "environment, log paths) and start nothing")
    parser.add_argument("--log-root", type=Path, help="where run folders go (default: test_conf log_root)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="deadline for one round of one case")
    parser.add_argument("--allow-version-mismatch", action="store_true",
                        help="run even if the installed framework differs from the case name's version "
                             "(recorded as a warning in the results)")
    parser.add_argument("--allow-kubeconfig-exec", action="store_true",
                        help="scheduler kubernetes: let the kubeconfig's credential commands run (an exec plugin, "
                             "a gcp cmd-path), whatever they are; without it only those in kubernetes.allow_exec "
                             "run, and any other stops the run at preflight")
    parser.add_argument("--test-conf", type=Path, help="run settings (default: <root>/configs/test_conf.yaml)")
    parser.add_argument("--cluster", type=Path, help="hosts (default: <root>/configs/cluster.yaml)")
    parser.add_argument("--root", type=Path, help="folder with cases/, vendors/, configs/ and training/ "
                                                  "(default: this checkout; or $ACCELBENCH_ROOT)")
    parser.add_argument("--db", type=db_argument, help="results store every attempt is written to: a file, or "
                        "postgresql://USER@HOST:PORT/DATABASE (password from $PGPASSWORD or ~/.pgpass) "
                        "(default: test_conf's db, else <log root>/results.db)")
    parser.add_argument("--strict", action="store_true",
                        help="refuse (exit 2, before anything runs) a case whose resolved workload departs from its "
                             "case's policy (cases/policy.yaml, cases/<case>/policy.yaml); without it such a run "
                             "runs and is marked non-compliant")
    parser.add_argument("--check", action="store_true",
                        help="after the run, check each figure against the case's and vendor's references.yaml, "
                             "and the loss curve against the case's loss_reference.yaml; "
                             f"exit {EXIT_CONVERGENCE} on a loss outside its band, {EXIT_REGRESSION} on a regression, "
                             f"{EXIT_CONTENDED} when a contended round was not judged, "
                             f"{EXIT_NOTHING_CHECKED} when no reference matches any case")
    parser.add_argument("--require-quiet", type=float, nargs="?", const=300.0, metavar="SECONDS",
                        help="before each round, wait up to SECONDS (default 300) for its hosts to be within "
                             f"test_conf's contention limits; past that, stop with the figures (exit {EXIT_CONTENDED})")
    add_check_expectation(parser)


def add_check_expectation(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-reference-expected", action="store_true",
                        help=f"with --check: no matching reference is fine (exit 0, not {EXIT_NOTHING_CHECKED})")


def add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=db_argument, help="results store: a file, or postgresql://USER@HOST:PORT/DATABASE "
                        "(default: test_conf's db, else <log root>/results.db)")
    parser.add_argument("--log-root", type=Path, help="log root holding results.db (default: test_conf log_root)")
    parser.add_argument("--root", type=Path, help="folder with cases/, vendors/, configs/ (default: this checkout)")


def add_sweep(sub) -> None:
    sw = sub.add_parser(
        "sweep", help="run a grid of points (cases, layouts, batch sizes, ...): one row per point",
        description="Every point becomes a row: ok, oom, failed, unsupported, timeout or skipped (with why). "
                    "The sweep never stops at a failure; Ctrl-C lets the running point finish, then stops and "
                    "prints how to resume (a second Ctrl-C stops the running point too).",
        epilog="e.g. accelbench sweep gpt2_tiny:torch:cpu:1:1 --grid train.micro_batch_size=1,2,4 "
               "--grid nprocs_per_node=1,2; accelbench sweep configs/sweeps/gpt2_tiny_layouts.yaml (configs/sweeps/ "
               "has sweep files)")
    sw.add_argument("case_names", nargs="*", metavar="CASE_NAME", help="base case names (axes replace their "
                                                                       "fields), or a sweep file (.yaml) as --file")
    sw.add_argument("--file", type=Path, help="sweep file (YAML): cases, set, axes, exclude, where, scaling, table")
    sw.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                    help="an axis: a workload key (train.micro_batch_size=1,2,4), a case-name field (case, "
                         "framework, hardware, nnodes, nprocs_per_node), layout=1x2,1x4 or extern_config=A,B")
    sw.add_argument("--max-batch", action="store_true", help="per point, find the largest micro batch that fits "
                                                             "(double until oom, then bisect)")
    sw.add_argument("--max-batch-limit", type=int, default=1024, metavar="N", help="largest size tried (1024)")
    sw.add_argument("--resume", metavar="RUN", help="run the points of sweep RUN (id, unique prefix or 'last') "
                                                    "not yet done, into RUN")
    sw.add_argument("--show", metavar="RUN", help="print the tables of sweep RUN (id, unique prefix or 'last'); "
                                                  "run nothing")
    sw.add_argument("--format", choices=list(SWEEP_FORMATS), default="terminal", help="how the tables are printed")
    sw.add_argument("--output", type=Path, help="write the tables (markdown or html) to this file")
    sw.add_argument("--across", metavar="AXIS", help="the pivot table's column axis (default: the last axis)")
    sw.add_argument("--versus", metavar="AXIS=A,B", help="a table of A against B on that axis, with speedup %%")
    add_run_options(sw)


def add_store_commands(sub) -> None:
    """runs, show, report, compare, import, bundle and store: the commands about stored results."""
    runs = sub.add_parser("runs", help="list past runs (newest first)")
    runs.add_argument("--limit", type=int, default=20, help="how many (default 20; 0 for all)")
    add_store_options(runs)

    show = sub.add_parser("show", help="print one run: every attempt with its figures, warnings and environment")
    show.add_argument("run", metavar="RUN", help="run id, a unique prefix of one, or 'last'")
    show.add_argument("--verbose", "-v", action="store_true", help="also who shared the machine: the other "
                      "processes over each round's measured steps (pids, CPU), on its devices, other runs' leftovers")
    add_store_options(show)

    add_report(sub)
    add_store_options(add_history(sub))
    add_table(sub)
    add_reference(sub)
    add_import(sub)
    add_bundle(sub)
    add_certify(sub)

    store = sub.add_parser("store", help="look after the results store: repair, copy",
                           description="The results store's upkeep.")
    store_sub = store.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    repair = store_sub.add_parser(
        "repair", help="add the attempts whose results.json the store lacks (never twice); rebuild a damaged store",
        description="Reads every round's results.json under the log root (or the PATHs given) and adds each "
                    "attempt the store does not hold, with its run when the store has lost that too. Attempts "
                    "already stored are recognised and never added twice, so it can run any number of times. "
                    "Runs whose orchestrator is still running are left alone, as are runs started on another "
                    "host. A damaged store is moved aside (results.db.damaged-<time>) and rebuilt.")
    repair.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="results.json files or folders to read (default: the log root)")
    add_store_options(repair)
    copy = store_sub.add_parser(
        "copy", help="copy every run of one store into another (SQLite <-> PostgreSQL), never twice",
        description="Copies every run and attempt FROM holds that TO lacks, as stored: run ids, attempt ids, row "
                    "versions and log references (log_dir, results_path). A run TO holds already is left as it is, "
                    "so the copy can run again. The log folders stay where they are.",
        epilog="e.g. accelbench store copy logs/results.db postgresql://bench@db.example:5432/results")
    copy.add_argument("source", type=db_argument, metavar="FROM", help="a results.db file or a postgresql:// URL")
    copy.add_argument("target", type=db_argument, metavar="TO", help="a results.db file (made if missing) or a "
                                                                       "postgresql:// URL")


def add_report(sub) -> None:
    report = sub.add_parser(
        "report", help="report runs from the store: terminal, Markdown, HTML, JSON or CSV",
        description="Aggregate stored attempts per case (mean and spread over rounds) and render them.",
        epilog="SELECT: run ids (or prefixes, or 'last') and/or KEY=VALUE filters on "
               f"{', '.join(FILTER_KEYS)}; default: the last run")
    report.add_argument("select", nargs="*", metavar="SELECT")
    report.add_argument("--format", choices=list(REPORT_FORMATS), default="terminal")
    report.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    report.add_argument("--check", action="store_true",
                        help="mark each figure pass/fail against the case's and vendor's references.yaml, and "
                             "each loss curve against the case's loss_reference.yaml; "
                             f"exit {EXIT_CONVERGENCE} on a loss outside its band, {EXIT_REGRESSION} on a regression, "
                             f"{EXIT_NOTHING_CHECKED} when no reference matches any row")
    add_check_expectation(report)
    add_store_options(report)

    cmp_ = sub.add_parser(
        "compare", help="A against B per matching case, with B's speedup in percent",
        description="Each side is a run (id, prefix, 'last') or comma-separated KEY=VALUE filters, e.g. "
                    "'accelbench compare framework=torch framework=paddle' or 'micro_batch_size=4 "
                    "micro_batch_size=8' (layout and batch facts filter too). Rows pair on what ran: case, "
                    "framework, hardware, model and the layout and batch facts (not the extern config's file "
                    "name), less the keys the two sides filter differently; rows left over pair when exactly one "
                    "setting differs, and the row names it. A change smaller than CV(A) + CV(B) is marked "
                    "'within noise'.")
    cmp_.add_argument("a", metavar="A")
    cmp_.add_argument("b", metavar="B")
    cmp_.add_argument("--format", choices=list(COMPARE_FORMATS), default="terminal")
    cmp_.add_argument("--html", type=Path, metavar="FILE",
                      help="also write the compare as one self-contained HTML page (table and charts) to FILE")
    add_store_options(cmp_)


def add_table(sub) -> None:
    table = sub.add_parser(
        "table", help=f"a published table beside our runs: {', '.join(TABLE_NAMES)}",
        description="Each source's table in its shape: per cell the published figure (with its source and "
                    "conditions), ours from the store (mean ± CV over the ok rounds of one workload) and the ratio "
                    "ours / published; cells not run say why. mfu: the Benchmark LLM Training repository's MFU "
                    "tables (H100); flagperf_gpt3: FlagPerf's GPT-3 Paddle guide (A100 80G 1x8); finetune: "
                    "PaddleNLP against Torch (A100 80G); ppo: ColossalAI chat's benchmark grid (no published "
                    "figures). HTML adds grouped bars of published and ours.",
        epilog="SELECT: run ids (or prefixes, or 'last': the newest run that holds rows of the table) and/or "
               "KEY=VALUE filters, as for report; default: every stored run (none: the published figures alone). "
               "e.g. accelbench table mfu --format markdown")
    table.add_argument("name", choices=TABLE_NAMES, metavar="TABLE", help=", ".join(TABLE_NAMES))
    table.add_argument("select", nargs="*", metavar="SELECT")
    table.add_argument("--format", choices=list(TABLE_FORMATS), default="terminal")
    table.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    add_store_options(table)


def add_reference(sub) -> None:
    ref = sub.add_parser("reference", help="loss-curve references: record one from stored runs of several data "
                                           "seeds (cases/<case>/loss_reference.yaml)")
    ref_sub = ref.add_subparsers(dest="reference_command", metavar="ACTION", required=True)
    rec = ref_sub.add_parser("record", help="the mean and seed spread of the loss per step over N >= 3 runs",
                             description="Each RUN's ok rounds must be one workload, differing only in data.seed "
                                         "(run them with --set data.seed=1, 2, 3). Check a run against it with "
                                         f"accelbench report RUN --check (exit {EXIT_CONVERGENCE} outside the band).")
    rec.add_argument("runs", nargs="+", metavar="RUN", help="run ids (or unique prefixes)")
    rec.add_argument("--first-step", type=int, help="first step checked (default: 21, or half the steps if fewer)")
    rec.add_argument("--k", type=float, default=3.0, help="band: mean ± k·max(std, floor·mean) (default 3)")
    rec.add_argument("--floor", type=float, default=0.005, help="relative floor of the spread (default 0.005)")
    rec.add_argument("--max-outside", type=float, default=0.1, help="share of steps allowed outside (default 0.1)")
    rec.add_argument("--mean-rel-error", type=float, default=0.02, help="largest mean relative error (default 0.02)")
    rec.add_argument("--dry-run", action="store_true", help="print the curve and where it would go; write nothing")
    add_store_options(rec)


def add_import(sub) -> None:
    imp = sub.add_parser(
        "import", help="store results from logs other tools wrote (MLPerf MLLOG, Megatron-LM/-Core/-DeepSpeed, NeMo, "
                       "torchtitan, PaddleNLP, PaddleFormers, ERNIEKit)",
        description="Each file becomes one attempt (round 1, 2, ...) of one imported run. With --case-name, "
                    "accelbench's own TFLOP/s and MFU are derived from the case; without, only the log's own "
                    "figures are stored, under what the log says ran.")
    imp.add_argument("files", nargs="+", type=Path, metavar="LOG")
    imp.add_argument("--format", metavar="PARSER",  # not for a bundle (accelbench bundle), found by its manifest
                     help="mllog, megatron, megatron-deepspeed, nemo, torchtitan, paddlenlp, paddleformers or erniekit "
                          "(newest version), or pinned: mllog/1, ...")
    imp.add_argument("--case-name", help=f"what ran, as a case of this checkout: {casename.FORMAT}, e.g. "
                                         "gpt3_6.7B:paddle_2.5.1:A100:1:8 (omit it for the log's own figures only)")
    imp.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE",
                     help="override the case's workload where the log's run differs, e.g. --set model.seq_len=8192 "
                          "(repeatable; needs --case-name)")
    imp.add_argument("--extern-config", help="the extern config name the run used, if any")
    imp.add_argument("--vendor", help="the vendor whose references apply (default: none)")
    imp.add_argument("--model", help="with no --case-name: the model's name (default: what the log states)")
    imp.add_argument("--hardware", help="with no --case-name: the hardware (default: what the log states; a "
                                        "declared one, e.g. H100, gives the device memory)")
    imp.add_argument("--nnodes", type=int, help="with no --case-name: nodes (default: what the log states)")
    imp.add_argument("--nprocs-per-node", type=int, help="with no --case-name: devices per node (default: what "
                                                         "the log states)")
    imp.add_argument("--skip-intervals", type=int, default=1,
                     help="leading logged intervals to treat as warm-up and exclude (default 1)")
    imp.add_argument("--run-id", help="id for the imported run (default: import-<time>-<hex>)")
    add_store_options(imp)


def add_bundle(sub) -> None:
    bundle = sub.add_parser(
        "bundle", help="one .tar.gz of a run: round records, every log, resolved configs, environment, checksums",
        description="Writes the run's stored attempts, every file of its run folder (results.json, logs, "
                    "config.json, resolved.yaml), the environment and a SHA-256 manifest into one archive; "
                    "`accelbench import BUNDLE --db OTHER` reads it back into another store.")
    bundle.add_argument("run", metavar="RUN", help="run id, a unique prefix of one, or 'last'")
    bundle.add_argument("-o", "--output", type=Path, help="archive to write (default: <run_id>.accelbench.tar.gz)")
    add_store_options(bundle)


def add_certify(sub) -> None:
    cert = sub.add_parser(
        "certify", help="a signed certificate of a run: figures, compliance, workload, environment, every log's hash",
        description="Signs (ed25519) the run's figures and compliance verdict, its workloads' resolved settings, "
                    "the extern config and vendor file hashes, the environment, and the SHA-256 of every file of "
                    "its run folder and of every stored round record, with a validity period. A non-compliant run "
                    "is certified too: its certificate says so in its first field.",
        epilog="a key: openssl genpkey -algorithm ed25519 -out key.pem; its public half for verify: "
               "openssl pkey -in key.pem -pubout -out key.pub")
    cert.add_argument("run", metavar="RUN", help="run id, a unique prefix of one, or 'last'")
    cert.add_argument("--key", type=Path, required=True, metavar="PRIVATE_KEY", help="ed25519 private key (PEM)")
    cert.add_argument("-o", "--output", type=Path, required=True, metavar="FILE", help="certificate to write (JSON)")
    cert.add_argument("--valid-days", type=float, default=365, help="validity period in days (default 365)")
    cert.add_argument("--baseline", metavar="RUN", help="another run to bind, with the verdict against it")
    cert.add_argument("--baseline-at-least", type=float, default=0.95, metavar="FRACTION",
                      help="the verdict's bound: tokens/s/device at least this fraction of the baseline's (0.95)")
    add_store_options(cert)
    ver = sub.add_parser(
        "verify", help="check a certificate's signature, validity and, with --bundle, every log and record",
        description="Exit 0: verified; 1: refused, with each thing that does not match; 2: usage (a file that "
                    "is no certificate, a key that is no ed25519 key). Without --key the signature is checked "
                    "against the key the certificate names, which proves it whole but not who signed it.")
    ver.add_argument("file", type=Path, metavar="FILE", help="the certificate (JSON)")
    ver.add_argument("--key", type=Path, metavar="PUBLIC_KEY", help="the signer's ed25519 public key (PEM)")
    ver.add_argument("--bundle", type=Path, metavar="BUNDLE", help="the run's bundle (accelbench bundle): every "
                                                                   "file and record must hash as certified")


def add_calibrate(sub) -> None:
    cal = sub.add_parser("calibrate", help="measure the hardware's GEMM peak per dtype; MFU is then shown "
                                           "against it beside the datasheet peak",
                         description=CALIBRATE)
    cal.add_argument("hardware", metavar="HARDWARE", help="a hardware name from `accelbench list`, e.g. cpu")
    cal.add_argument("--dtype", action="append", dest="dtypes", choices=GEMM_DTYPES,
                     help="precision to measure (repeatable; default: fp32 on a CPU, the declared peaks' dtypes "
                          "on a device)")
    cal.add_argument("--iters", type=int, default=10, help="timed iterations per size (default 10)")
    cal.add_argument("--root", type=Path,
                     help="folder with vendors/, where the peaks are written (default: this checkout)")
    cal.add_argument("--test-conf", type=Path, help="its contention: limits judge the machine during the benchmark "
                                                    "(default: <root>/configs/test_conf.yaml)")


def add_vendor_import(vendor_sub) -> None:
    cmd = vendor_sub.add_parser("import-flagperf", help="convert a FlagPerf vendor folder's config_*.py into "
                                                        "accelbench extern configs (YAML with provenance comments)")
    cmd.add_argument("folder", type=Path, metavar="FOLDER", help="FlagPerf's training/<vendor>/ (its "
                                                                 "<case>-<framework>/config/config_*.py are read)")
    cmd.add_argument("--vendor", help="accelbench vendor to write into (default: FOLDER's name)")
    cmd.add_argument("--root", type=Path, help="checkout holding cases/ and vendors/ (default: this one)")
    cmd.add_argument("--force", action="store_true", help="replace YAML configs that are already there")
    cmd.add_argument("--dry-run", action="store_true", help="print what would be written, write nothing")
