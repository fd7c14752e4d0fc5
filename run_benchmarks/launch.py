"""Execute a RunPlan: preflight -> start nodes -> wait -> collect -> clean up -> analyse.

A failure on one node stops every node of that case; whatever the ending
(success, crash, deadline, Ctrl-C) the logs stay and the round gets a result.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional, Protocol, Sequence

import yaml

from training import perflog
from training.contract import expand_placeholders

from . import analyze, collect, casename, monitoring
from .errors import PreflightError
from . import containers, images
from .codesync import sync_code
from .vendors import FrameworkRuntime
from .hosts import Host, Job, connect
from .plan import CasePlan, NodePlan, RoundPlan, RunPlan
from .probes import run_probes
from .store import ResultStore, row_from_document

MONITOR_GRACE_S = 5.0
MIN_FREE_BYTES = 1 << 30  # logs, configs and compile caches of a round fit in far less
POLL_S = 0.5  # how often the orchestrator looks at its nodes; it shares the cores being measured
STOP_GRACE_S = 10.0
START_RETRIES = 2  # extra attempts for a round whose ranks never connected (Framework.start_error)
_OOM_MARKERS = ("OutOfMemoryError", "CUDA out of memory", "out of memory", "can't allocate memory")


@dataclass
class RoundResult:
    case_name: str
    round: int
    dir: Path
    status: str  # ok | failed | oom | unsupported | timeout | interrupted
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    error_lines: list[str] = field(default_factory=list)
    metrics: Optional[analyze.RoundMetrics] = None
    exit_codes: dict[int, Optional[int]] = field(default_factory=dict)
    steps_completed: int = 0
    nodes: list[dict] = field(default_factory=list)
    started_at: str = ""
    ended_at: str = ""
    wall_time_s: Optional[float] = None  # end to end: nodes started -> logs collected and analysed
    monitor: Optional[dict] = None  # monitoring.summarize_round: utilisation, power, energy per device


class Reporter(Protocol):
    def round_started(self, case: CasePlan, rnd: RoundPlan) -> None: ...
    def progress(self, case: CasePlan, rnd: RoundPlan, step: int) -> None: ...
    def round_finished(self, case: CasePlan, rnd: RoundPlan, result: RoundResult) -> None: ...


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def docker_errors() -> tuple:
    import docker

    return (docker.errors.DockerException, OSError, RuntimeError)


def parallel_map(fn: Callable, items: list) -> tuple[list, list[Exception]]:
    """``fn`` over ``items`` on one thread each (host operations wait on the network, not the CPU):
    the results in order (None where it raised), and the exceptions raised."""
    if not items:
        return [], []
    results: list = [None] * len(items)
    errors: list[Exception] = []
    with ThreadPoolExecutor(max_workers=min(32, len(items))) as pool:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        for future in futures:
            try:
                results[futures[future]] = future.result()
            except Exception as exc:  # noqa: BLE001 - handed back to the caller, which raises the first
                errors.append(exc)
    return results, errors


class Runner:
    def __init__(self, plan: RunPlan, reporter: Reporter, orchestrator_env: dict,
                 allow_version_mismatch: bool = False, clock: Callable[[], float] = time.monotonic,
                 plan_root: Path | None = None, store: Optional[ResultStore] = None):
        self.plan, self.reporter, self.orchestrator_env = plan, reporter, orchestrator_env
        self.store = store  # every attempt becomes a row as soon as it ends
        self.plan_root = plan_root  # the checkout whose training/ goes to ssh hosts
        self.images: dict[str, images.ImageSpec] = {}  # per case name
        self.docker: dict[str, object] = {}  # per host name: its Docker SDK client
        self.allow_version_mismatch = allow_version_mismatch
        self.clock = clock
        self.hosts: dict[str, Host] = {}
        self.results: list[RoundResult] = []
        self.version_warnings: dict[str, list[str]] = {}
        self.probed: dict[tuple[str, str], dict] = {}  # (host, vendor) -> probe results
        self.device_counts: dict[str, dict] = {}  # host -> devices counted at preflight, and how

    # ------------------------------------------------------------ preflight

    def connect_and_preflight(self) -> None:
        """Every host at once: connect, copy the workload code (ssh), check the framework's version."""
        specs = {node.host.name: node.host for case in self.plan.cases for node in case.rounds[0].nodes}
        connected, errors = parallel_map(connect, list(specs.values()))
        self.hosts.update({spec.name: host for spec, host in zip(specs.values(), connected) if host is not None})
        if errors:
            raise errors[0]
        remote = [node for case in self.plan.cases for node in case.rounds[0].nodes if node.remote_dir is not None]
        targets = {(node.host.name, str(node.cwd)): node for node in remote}
        _, errors = parallel_map(self._sync_code, list(targets.values()))
        if errors:
            raise errors[0]
        _, errors = parallel_map(self._check_resources, list(self._resource_needs().items()))
        if errors:
            raise errors[0]
        self._ensure_images()
        for case in self.plan.cases:
            self.version_warnings[str(case.name)] = self._check_framework(case)
        self._probe_hosts()

    def _probe_hosts(self) -> None:
        """The vendor's environment probes, once per host and vendor, all hosts at once."""
        wanted = {(node.host.name, case.hardware.vendor): case.hardware.vendor_spec.all_probes(case.hardware.kind)
                  for case in self.plan.cases for node in case.rounds[0].nodes}
        found, _ = parallel_map(lambda item: run_probes(self.hosts[item[0][0]], item[1]), list(wanted.items()))
        self.probed.update({key: probes or {} for key, probes in zip(wanted, found)})

    def _resource_needs(self) -> dict[str, tuple[str, int, Optional[NodePlan], Optional[CasePlan]]]:
        """Per host: the folder it writes to, the most processes any case starts there, and a node (and its
        case) whose accelerator kind counts devices, to count them with."""
        needs: dict[str, tuple[str, int, Optional[NodePlan], Optional[CasePlan]]] = {}
        for case in self.plan.cases:
            for node in case.rounds[0].nodes:
                folder = node.host.work_root if node.remote_dir is not None else str(self.plan.dir.parent)
                _, procs, counted, counted_case = needs.get(node.host.name, (folder, 0, None, None))
                if case.hardware.kind.counted and case.name.nprocs_per_node >= procs:
                    counted, counted_case = node, case
                needs[node.host.name] = (folder, max(procs, case.name.nprocs_per_node), counted, counted_case)
        return needs

    def _check_resources(self, item) -> None:
        name, (folder, procs, node, case) = item
        host = self.hosts[name]
        free = host.free_bytes(folder)
        if free is not None and free < MIN_FREE_BYTES:
            raise PreflightError(f"host {name}: only {free / 2**30:.1f} GiB free under {folder}; a run needs "
                                 f"{MIN_FREE_BYTES / 2**30:.0f} GiB for logs and compile caches",
                                 "free space there, or point the log root (work_root for ssh hosts) elsewhere")
        if node is None:
            return
        count, source = self._count_devices(host, node, case)
        self.device_counts[name] = {"count": count, "command": source}
        if count < procs:
            raise PreflightError(f"host {name}: {procs} process(es) per node need as many {case.hardware.spec.kind} "
                                 f"devices; `{source}` lists {count}",
                                 "lower nprocs_per_node in the case name, or run on hosts with more devices")

    @staticmethod
    def _count_devices(host: Host, node: NodePlan, case: CasePlan) -> tuple[int, str]:
        """The first of the kind's device-count commands that runs on the host answers."""
        tried = []
        for counter in case.hardware.kind.device_count:
            argv = expand_placeholders(counter.command, node.python, str(node.cwd))
            try:
                result = host.run(argv)
            except OSError as exc:
                tried.append(f"{' '.join(argv)}: {exc.strerror or exc}")
                continue
            if result.returncode == 0:
                return counter.count(result.stdout), " ".join(argv)
            tried.append(f"{' '.join(argv)}: exit {result.returncode} {result.stderr.strip()[-120:]}".strip())
        raise PreflightError(f"host {host.name}: no device-count command of accelerator kind "
                             f"{case.hardware.spec.kind!r} ran: " + "; ".join(tried),
                             "install the vendor's tool there (on the PATH of a non-interactive SSH session), or "
                             "fix device_count of the kind")

    def _ensure_images(self) -> None:
        """The vendor's image on every host that runs a node in a container, built there if missing."""
        wanted: dict[tuple[str, str], tuple] = {}
        for case in self.plan.cases:
            runtime = case.hardware.vendor_spec.frameworks.get(case.name.framework) or FrameworkRuntime()
            for node in case.rounds[0].nodes:
                if node.container is None:
                    continue
                key = (str(case.name), node.host.name)
                if str(case.name) not in self.images:
                    self.images[str(case.name)] = images.image_for(
                        case.hardware.vendor, case.hardware.vendor_dir, case.name.framework,
                        case.name.framework_version, runtime.image, runtime.container.build_args)
                wanted[key] = (node.host.name, self.images[str(case.name)])
        for host_name, _ in wanted.values():
            if host_name not in self.docker:
                self.docker[host_name] = containers.docker_client(self.hosts[host_name])
        # Hosts may share one engine (one machine, several addresses): build once per engine and image.
        engines = dict(zip(self.docker, parallel_map(lambda name: self.docker[name].info()["ID"],
                                                     list(self.docker))[0]))
        jobs = {(engines.get(host_name) or host_name, image.tag): (host_name, image)
                for host_name, image in wanted.values()}
        _, errors = parallel_map(lambda item: self._ensure_image(*item), list(jobs.values()))
        if errors:
            raise errors[0]

    def _ensure_image(self, host_name: str, image: images.ImageSpec) -> None:
        try:
            images.ensure_image(self.docker[host_name], image, host_name)
        except docker_errors() as exc:
            raise PreflightError(f"host {host_name}: its Docker engine ({self.hosts[host_name].spec.docker_host}) "
                                 f"does not answer: {exc}", "start dockerd there, or fix docker_host in the "
                                                            "cluster config") from None

    def _sync_code(self, node: NodePlan) -> None:
        try:
            sync_code(self.hosts[node.host.name], self.plan_root, node.cwd)
        except OSError as exc:
            raise PreflightError(f"host {node.host.name}: could not copy the workload code to {node.cwd}: {exc}",
                                 "check that work_root in the cluster config is writable on that host") from None

    def _check_framework(self, case: CasePlan) -> list[str]:
        warnings, seen = [], set()
        for node in case.rounds[0].nodes:
            python = node.python
            if (node.host.name, python) in seen:
                continue
            seen.add((node.host.name, python))
            if node.container is not None:
                image = self.images[str(case.name)].tag
                try:
                    installed = containers.distribution_version(self.docker[node.host.name], image, python,
                                                                case.framework.distributions)
                except docker_errors() as exc:
                    raise PreflightError(f"host {node.host.name}: {python} does not run in image {image}: "
                                         f"{str(exc).strip()[-300:]}",
                                         "set hosts[].python to the image's interpreter (default: python "
                                         "on the image's PATH)") from None
            else:
                installed = self.hosts[node.host.name].distribution_version(python, case.framework.distributions)
            where = f"host {node.host.name} ({python})"
            if installed is None:
                raise PreflightError(f"{' or '.join(case.framework.distributions)} is not installed for {where}",
                                     "install it there (./dev setup installs torch for this checkout), "
                                     "or set hosts[].python in the cluster config")
            wanted = case.name.framework_version
            if wanted and not casename.version_matches(wanted, installed):
                message = (f"case {str(case.name)!r} asks for {case.name.framework} {wanted} "
                           f"but {where} has {installed}")
                if not self.allow_version_mismatch:
                    raise PreflightError(message, f"name the installed version ({case.name.framework}_"
                                                  f"{installed.split('+')[0]}), or pass --allow-version-mismatch")
                warnings.append(message + " (allowed by --allow-version-mismatch)")
        return warnings

    # ------------------------------------------------------------ running

    def run(self) -> list[RoundResult]:
        try:
            for case in self.plan.cases:
                for rnd in case.rounds:
                    self._run_round_retrying_start_errors(case, rnd)
        finally:
            self.close()
        return self.results

    @staticmethod
    def _container_options(case: CasePlan):
        runtime = case.hardware.vendor_spec.frameworks.get(case.name.framework) or FrameworkRuntime()
        return runtime.container

    def close(self) -> None:
        for client in self.docker.values():
            client.close()
        self.docker.clear()
        for host in self.hosts.values():
            host.close()
        self.hosts.clear()

    def _run_round_retrying_start_errors(self, case: CasePlan, rnd: RoundPlan) -> None:
        """A round whose ranks never connected (no step done) is not a result: keep its logs aside, run again."""
        notes: list[str] = []
        for attempt in range(1, START_RETRIES + 2):
            try:
                result = self._run_round(case, rnd, notes)
            except KeyboardInterrupt:  # the interrupted attempt is a row too
                self._store(case, self.results[-1], attempt)
                raise
            line = case.framework.start_error_in(result.error_lines) if result.steps_completed == 0 \
                and result.status == "failed" else None
            if line is None or attempt > START_RETRIES:
                self._store(case, result, attempt)
                return
            kept = rnd.dir.with_name(f"{rnd.dir.name}.start-error{attempt}")
            shutil.rmtree(kept, ignore_errors=True)
            rnd.dir.rename(kept)
            self.results.remove(result)
            self._store(case, result, attempt, status="start_error", results_path=kept / "results.json")
            notes.append(f"attempt {attempt} did not start ({line.strip()[:200]}); retried; its logs: {kept}")

    def _store(self, case: CasePlan, result: RoundResult, attempt: int, status: Optional[str] = None,
               results_path: Optional[Path] = None) -> None:
        if self.store is None:
            return
        document = result_document(case, result, self.orchestrator_env)
        if status:
            document["status"] = status
        if results_path:
            document["results_path"] = str(results_path)
        try:
            self.store.add_attempt(row_from_document(document, attempt))
        except sqlite3.Error as exc:  # the results.json files stay; the store can be rebuilt from them
            result.warnings.append(f"could not write the attempt to {self.store.path}: {exc}")

    def _start_monitor(self, case: CasePlan, node: NodePlan, result: RoundResult) -> Optional[Job]:
        """The node's host and accelerator sampler; one that cannot start is a warning, not a failure."""
        if node.monitor_argv is None:
            return None
        output = node.log_dir / "monitor.log"
        try:
            if node.container is not None:
                return containers.run_node(
                    self.docker[node.host.name], self.images[str(case.name)].tag, monitor_container(node),
                    node.monitor_argv, node.env, str(node.cwd), node.container.mounts,
                    self._container_options(case), output)
            return self.hosts[node.host.name].start(node.monitor_argv, node.env, node.cwd, output)
        except Exception as exc:  # noqa: BLE001 - the benchmark runs without its monitor
            result.warnings.append(f"the monitor of node {node.node_rank} did not start: {type(exc).__name__}: {exc}")
            return None

    def _run_round(self, case: CasePlan, rnd: RoundPlan, notes: Sequence[str] = ()) -> RoundResult:
        result = RoundResult(str(case.name), rnd.index, rnd.dir, status="failed", started_at=_now())
        began = time.monotonic()
        result.warnings += self.version_warnings.get(str(case.name), [])
        result.warnings += notes
        self.results.append(result)
        self._write_inputs(case, rnd)
        self.reporter.round_started(case, rnd)
        jobs: dict[int, Job] = {}
        monitors: dict[int, Job] = {}
        interrupted = False
        try:
            for node in rnd.nodes:
                (node.log_dir / "tmp").mkdir(parents=True, exist_ok=True)
                host = self.hosts[node.host.name]
                if node.remote_dir is not None:  # the host writes its logs there; they are fetched after
                    host.makedirs(node.remote_dir / "tmp")
                    host.put(rnd.config_path, node.remote_dir.parent / "config.json")
                monitor = self._start_monitor(case, node, result)
                if monitor is not None:
                    monitors[node.node_rank] = monitor
                if node.container is not None:
                    jobs[node.node_rank] = containers.run_node(
                        self.docker[node.host.name], self.images[str(case.name)].tag, node.container.name,
                        node.argv, node.env, str(node.cwd), node.container.mounts,
                        self._container_options(case), node.launcher_log)
                else:
                    jobs[node.node_rank] = host.start(node.argv, node.env, node.cwd, node.launcher_log)
            outcome = self._wait(case, rnd, jobs, result)
        except KeyboardInterrupt:
            outcome, interrupted = "interrupted", True
        except Exception as exc:  # noqa: BLE001 - a node that cannot start fails its case, not the run
            outcome = "start_failed"
            result.reason = f"a node could not start: {type(exc).__name__}: {exc}"
        finally:
            for job in jobs.values():
                if job.poll() is None:
                    job.stop(STOP_GRACE_S)
            result.exit_codes.update({rank: job.poll() for rank, job in jobs.items()})
            for monitor in monitors.values():  # SIGTERM: it finishes its line and exits
                if monitor.poll() is None:
                    monitor.stop(MONITOR_GRACE_S)
            for node in rnd.nodes:  # a finished container stays until removed: remove every one, by name
                if node.container is not None and node.host.name in self.docker:
                    containers.remove_container(self.docker[node.host.name], node.container.name)
                    containers.remove_container(self.docker[node.host.name], monitor_container(node))
        self._finish(case, rnd, result, outcome, began)
        self.reporter.round_finished(case, rnd, result)
        if interrupted:
            raise KeyboardInterrupt
        return result

    def _wait(self, case: CasePlan, rnd: RoundPlan, jobs: dict[int, Job], result: RoundResult) -> str:
        deadline = self.clock() + case.timeout_s
        watcher = StepWatcher(case, rnd)
        while True:
            codes = {rank: job.poll() for rank, job in jobs.items()}
            failed = [rank for rank, code in codes.items() if code not in (None, 0)]
            if failed or all(code is not None for code in codes.values()):
                return "node_failed" if failed else "done"
            if self.clock() > deadline:
                result.reason = f"deadline of {case.timeout_s:g} s passed"
                return "timeout"
            step = watcher.latest_step()
            if step is not None:
                self.reporter.progress(case, rnd, step)
            time.sleep(POLL_S)

    def _write_inputs(self, case: CasePlan, rnd: RoundPlan) -> None:
        rnd.dir.mkdir(parents=True, exist_ok=True)
        rnd.config_path.write_text(rnd.worker_config.model_dump_json(indent=2) + "\n", encoding="utf-8")
        resolved = {
            "case_name": str(case.name),
            "case_file": str(case.case_file),
            "extern_config": str(case.extern_config) if case.extern_config else None,
            "workload": case.workload.model_dump(mode="json"),
            "set_by": {".".join(k): v for k, v in sorted(case.provenance.items())},
        }
        (rnd.dir / "resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False), encoding="utf-8")

    # ------------------------------------------------------------ afterwards

    def _finish(self, case: CasePlan, rnd: RoundPlan, result: RoundResult, outcome: str, began: float) -> None:
        ranks: list[collect.RankLog] = []
        figures = analyze.RoundAccumulator()
        steps_done = []
        all_logs = []
        for node in rnd.nodes:
            if node.remote_dir is not None:
                self._fetch_logs(node, result)
            all_logs += case.framework.gather_rank_logs(node.log_dir, node.node_rank, case.name.nprocs_per_node)
            _remove_empty_tmp(node.log_dir / "tmp")
        for rank in collect.read_ranks(all_logs):
            figures.add(rank)
            steps_done.append(rank.steps_done)
            rank.series = collect.StepSeries()  # folded in: its columns are not needed again
            ranks.append(rank)
        for rank in ranks:
            result.warnings += rank.problems
        result.steps_completed = min(steps_done, default=0)
        monitored = []
        for node in rnd.nodes:
            if node.monitor_argv is not None:
                figures_of_node, warnings = monitoring.summarize_node(node.monitor_dir)
                monitored.append({"node_rank": node.node_rank, "host": node.host.name, **figures_of_node})
                result.warnings += [f"node {node.node_rank}: {w}" for w in warnings]
        image = self.images.get(str(case.name))
        result.nodes = [
            {"node_rank": node.node_rank, "host": node.host.name,
             "exit_code": result.exit_codes.get(node.node_rank), "launcher_log": str(node.launcher_log),
             "image": image.tag if image and node.container else None,
             "image_id": self._image_id(node.host.name, image.tag) if image and node.container else None,
             "probes": self.probed.get((node.host.name, case.hardware.vendor), {}),
             "devices": self.device_counts.get(node.host.name),
             "environment": next((r.start.environment for r in ranks
                                  if r.start and r.start.node_rank == node.node_rank and r.start.environment),
                                 None)}
            for node in rnd.nodes
        ]
        self._classify(case, rnd, result, outcome, ranks, figures)
        if monitored:
            result.monitor = monitoring.summarize_round(
                monitored, result.metrics.tokens_per_s_total if result.metrics else None)
        result.ended_at = _now()
        result.wall_time_s = time.monotonic() - began
        write_results(rnd.results_path, case, result, self.orchestrator_env)

    def _image_id(self, host_name: str, tag: str) -> Optional[str]:
        """The id of the image a node ran (hosts sharing an engine share it; each engine is asked)."""
        try:
            return self.docker[host_name].images.get(tag).id
        except (KeyError, *docker_errors()):
            return None

    def _fetch_logs(self, node: NodePlan, result: RoundResult) -> None:
        try:
            self.hosts[node.host.name].get(node.remote_dir, node.log_dir)
        except OSError as exc:
            result.warnings.append(f"could not fetch the logs of node {node.node_rank} from "
                                   f"{node.host.name}:{node.remote_dir}: {exc}")

    def _classify(self, case: CasePlan, rnd: RoundPlan, result: RoundResult, outcome: str,
                  ranks: list[collect.RankLog], figures: analyze.RoundAccumulator) -> None:
        complete = len(ranks) == case.name.world_size and all(r.finished for r in ranks)
        if complete:
            result.status, result.reason = "ok", ""
            for rank, code in sorted(result.exit_codes.items()):
                if code not in (0, None):
                    result.warnings.append(f"node {rank} launcher exited with {code} after every rank had "
                                           "finished and reported; the figures are complete")
            if outcome == "timeout":
                result.warnings.append("the launcher outlived the deadline after every rank had finished")
            peak, note = case.hardware.peak_tflops(case.workload.train.precision)
            try:
                train = case.workload.train
                samples = (train.micro_batch_size * train.gradient_accumulation_steps
                           * case.workload.parallel.data_degree(case.name.world_size))
                result.metrics = figures.metrics(peak, note, samples, case.hardware.memory_total_bytes)
            except analyze.NothingToMeasure as exc:
                result.status, result.reason = "failed", f"no figures: {exc}"
            return
        result.error_lines = collect.error_lines(ranks, [n.launcher_log for n in rnd.nodes])
        if outcome == "interrupted":
            result.status, result.reason = "interrupted", "stopped by Ctrl-C; every node was stopped"
        elif outcome == "timeout":
            result.status = "timeout"
            result.reason += "; every node was stopped"
        else:
            text = "\n".join(result.error_lines)
            unsupported = [rank.unsupported.reason for rank in ranks if rank.unsupported is not None]
            if unsupported:
                result.status, result.reason = "unsupported", f"not supported on this device: {unsupported[0]}"
                return
            oom = any(m in text for m in _OOM_MARKERS)
            result.status = "oom" if oom else "failed"
            if outcome != "start_failed":
                result.reason = ("out of memory: " if oom else "") + _failure_reason(rnd.nodes, result.exit_codes,
                                                                                     ranks)


def _failure_reason(nodes: list[NodePlan], codes: dict[int, Optional[int]], ranks: list[collect.RankLog]) -> str:
    unfinished = [r.rank for r in ranks if not r.finished]
    bad = [f"node {n.node_rank} ({n.host.name}) exited with {codes.get(n.node_rank)}"
           for n in nodes if codes.get(n.node_rank) not in (0, None)]
    parts = bad + ([f"rank(s) {', '.join(map(str, unfinished))} did not finish"] if unfinished else [])
    return "; ".join(parts) or "the workers ended without reporting"


def _remove_empty_tmp(path: Path) -> None:
    """The per-node TMPDIR goes once the launcher is gone; anything left there is kept for a look."""
    if path.is_dir():
        leftovers = [p for p in path.rglob("*") if p.is_file()]
        if not leftovers:
            shutil.rmtree(path, ignore_errors=True)


class StepWatcher:
    """Follows rank 0's live stdout for the latest step, to show progress."""

    def __init__(self, case: CasePlan, rnd: RoundPlan):
        self.framework, self.node_dir = case.framework, rnd.nodes[0].log_dir
        self.path: Optional[Path] = None
        self.offset = 0
        self.step: Optional[int] = None

    def latest_step(self) -> Optional[int]:
        if self.path is None:
            self.path = self.framework.live_stdout(self.node_dir, local_rank=0)
            if self.path is None:
                return self.step
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return self.step
        complete = chunk.rfind("\n") + 1
        self.offset += len(chunk[:complete].encode("utf-8", errors="replace"))
        for line in chunk[:complete].splitlines():
            try:
                record = perflog.parse_line(line)
            except perflog.PerfLogError:
                continue
            if isinstance(record, perflog.StepRecord):
                self.step = record.step
        return self.step


def result_document(case: CasePlan, result: RoundResult, orchestrator_env: dict) -> dict:
    return {
        "schema": "accelbench.results/1",
        "run_id": case.rounds[0].worker_config.runtime.run_id,
        "case_name": result.case_name,
        "case": {
            "case": case.name.case, "framework": case.name.framework,
            "framework_version": case.name.framework_version, "hardware": case.name.hardware,
            "vendor": case.hardware.vendor, "nnodes": case.name.nnodes,
            "nprocs_per_node": case.name.nprocs_per_node, "world_size": case.name.world_size,
            "repeat": case.name.repeat, "extern_config": str(case.extern_config) if case.extern_config else None,
            "extern_config_hash": _file_sha256(case.extern_config),
        },
        "round": result.round,
        "status": result.status,
        "reason": result.reason,
        "warnings": result.warnings,
        "error_lines": result.error_lines,
        "started_at": result.started_at,
        "ended_at": result.ended_at,
        "wall_time_s": result.wall_time_s,
        "results_path": str(result.dir / "results.json"),
        "steps_completed": result.steps_completed,
        "metrics": result.metrics.to_dict() if result.metrics else None,
        "monitor": result.monitor,
        "workload": case.workload.model_dump(mode="json"),
        "environment": {"orchestrator": orchestrator_env, "nodes": result.nodes},
    }


def monitor_container(node: NodePlan) -> str:
    return f"{node.container.name}-monitor"


def _file_sha256(path: Optional[Path]) -> Optional[str]:
    if path is None:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def write_results(path: Path, case: CasePlan, result: RoundResult, orchestrator_env: dict) -> None:
    document = result_document(case, result, orchestrator_env)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a file
