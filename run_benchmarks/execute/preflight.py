"""Preflight: every host at once, before anything runs. Connect, prepare each node runtime (workload code
to remote hosts, images), check free disk and device counts, check the framework's version where the
launchers will run, and record the vendor's environment probes."""
from __future__ import annotations

from typing import Optional

from training.contract.names import ENV_VENDOR_DIR, expand_placeholders

from run_benchmarks.catalog import casename
from run_benchmarks.errors import PreflightError
from run_benchmarks.backends.hosts import Host, connect
from run_benchmarks.backends.fanout import fan_out
from run_benchmarks.plan import CasePlan, NodePlan, RunPlan
from run_benchmarks.execute.probes import run_probes
from run_benchmarks.backends.runtimes import RunRuntimes
from run_benchmarks.backends.schedulers import Scheduler, get as get_scheduler

MIN_FREE_BYTES = 1 << 30  # logs, configs and compile caches of a round fit in far less


class Preflight:
    def __init__(self, plan: RunPlan, hosts: dict[str, Host], runtimes: RunRuntimes,
                 allow_version_mismatch: bool = False):
        self.plan, self.hosts, self.runtimes = plan, hosts, runtimes
        self.scheduler: Scheduler = get_scheduler(plan.cluster.scheduler if plan.cluster else "hosts")(
            plan, hosts, runtimes)
        self.allow_version_mismatch = allow_version_mismatch
        self.version_warnings: dict[str, list[str]] = {}  # per case name
        self.probed: dict[tuple[str, str], dict] = {}  # (host, vendor) -> probe results
        self.device_counts: dict[tuple[str, str], dict] = {}  # (host, kind) -> devices counted, and how

    def run(self) -> None:
        first_nodes = [node for case in self.plan.cases for node in case.rounds[0].nodes]
        specs = {node.host.name: node.host for node in first_nodes}
        connected, errors = fan_out(connect, list(specs.values()))
        self.hosts.update({spec.name: host for spec, host in zip(specs.values(), connected) if host is not None})
        _raise_first(errors)
        self.scheduler.preflight()  # before any code is copied: a refused partition costs nothing
        targets = {(node.host.name, str(node.cwd)): node for node in first_nodes if node.remote_dir is not None}
        _raise_first(fan_out(lambda node: self.runtimes.of(node).sync_code(node), list(targets.values()))[1])
        _raise_first(fan_out(self._check_resources, list(self._resource_needs().items()))[1])
        for runtime in self.runtimes:
            runtime.prepare(self.plan.cases)
        for case in self.plan.cases:
            if self.scheduler.checks_framework:
                self.version_warnings[str(case.name)] = self._check_framework(case)
        if self.scheduler.checks_hosts:
            self._probe_hosts()

    def _probe_hosts(self) -> None:
        """The vendor's environment probes, once per host and vendor, all hosts at once."""
        wanted = {(node.host.name, case.hardware.vendor): (case.hardware.vendor_spec.all_probes(case.hardware.kind),
                                                           node.env.get(ENV_VENDOR_DIR))
                  for case in self.plan.cases for node in case.rounds[0].nodes}
        found, _ = fan_out(lambda item: run_probes(self.hosts[item[0][0]], *item[1]), list(wanted.items()))
        self.probed.update({key: probes or {} for key, probes in zip(wanted, found)})

    def _resource_needs(self) -> dict[str, tuple[str, int, list[tuple[int, NodePlan, CasePlan]]]]:
        """Per host: the folder it writes to, the most processes any case starts there, and per accelerator
        kind that counts devices the most processes a case of that kind starts there, with a node (and its
        case) to count them with. Per kind, not per host: a host may run a cpu case with more processes
        before a device case with fewer, and each kind counts its own devices."""
        folders: dict[str, str] = {}
        procs: dict[str, int] = {}
        counted: dict[tuple[str, str], tuple[int, NodePlan, CasePlan]] = {}
        for case in self.plan.cases:
            for node in case.rounds[0].nodes:
                name = node.host.name
                folders.setdefault(name, node.host.work_root if node.remote_dir is not None
                                   else str(self.plan.dir.parent))
                procs[name] = max(procs.get(name, 0), case.name.nprocs_per_node)
                key = (name, case.hardware.spec.kind)
                if case.hardware.kind.counted and self.scheduler.checks_hosts and \
                        case.name.nprocs_per_node > counted.get(key, (0,))[0]:
                    counted[key] = (case.name.nprocs_per_node, node, case)
        return {name: (folders[name], procs[name], [c for (host, _), c in counted.items() if host == name])
                for name in folders}

    def _check_resources(self, item) -> None:
        name, (folder, _, counted) = item
        host = self.hosts[name]
        free = host.free_bytes(folder)
        if free is not None and free < MIN_FREE_BYTES:
            raise PreflightError(f"host {name}: only {free / 2**30:.1f} GiB free under {folder}; a run needs "
                                 f"{MIN_FREE_BYTES / 2**30:.0f} GiB for logs and compile caches",
                                 "free space there, or point the log root (work_root for ssh hosts) elsewhere")
        for procs, node, case in counted:
            count, source, unmatched = self._count_devices(host, node, case)
            self.device_counts[(name, case.hardware.spec.kind)] = {"count": count, "command": source}
            if count < procs and unmatched:  # the pattern's fault, not the host's: never "lists 0 devices"
                raise PreflightError(f"host {name}: {unmatched}",
                                     f"fix device_count's pattern of kind {case.hardware.spec.kind!r} (its "
                                     "vendor.yaml) to match the tool's lines; `accelbench vendor check` runs it")
            if count < procs:
                raise PreflightError(f"host {name}: {procs} process(es) per node need as many "
                                     f"{case.hardware.spec.kind} devices; `{source}` lists {count}",
                                     "lower nprocs_per_node in the case name, or run on hosts with more devices")

    def _check_framework(self, case: CasePlan) -> list[str]:
        warnings, seen = [], set()
        for node in case.rounds[0].nodes:
            python = node.python
            if (node.host.name, python) in seen:
                continue
            seen.add((node.host.name, python))
            installed = self.runtimes.of(node).installed_version(case, node)
            where = f"host {node.host.name} ({python})"
            if installed is None:
                raise PreflightError(f"{' or '.join(case.framework.distributions)} is not installed for {where}",
                                     "install it there (./dev setup installs torch and paddlepaddle for this "
                                     "checkout; ./dev run only what its case needs), or set hosts[].python in the "
                                     "cluster config")
            wanted = case.name.framework_version
            if wanted and not casename.version_matches(wanted, installed):
                message = (f"case {str(case.name)!r} asks for {case.name.framework} {wanted} "
                           f"but {where} has {installed}")
                if not self.allow_version_mismatch:
                    raise PreflightError(message, f"name the installed version ({case.name.framework}_"
                                                  f"{installed.split('+')[0]}), or pass --allow-version-mismatch")
                warnings.append(message + " (allowed by --allow-version-mismatch)")
        return warnings

    @staticmethod
    def _count_devices(host: Host, node: NodePlan, case: CasePlan) -> tuple[int, str, Optional[str]]:
        """The first of the kind's device-count commands that runs on the host answers: its count, its
        command, and why its pattern matched nothing (None when it matched)."""
        tried = []
        for counter in case.hardware.kind.device_count:
            argv = expand_placeholders(counter.command, node.python, str(node.cwd), node.env.get(ENV_VENDOR_DIR))
            try:
                result = host.run(argv)
            except OSError as exc:
                tried.append(f"{' '.join(argv)}: {exc.strerror or exc}")
                continue
            if result.returncode == 0:
                return counter.count(result.stdout), " ".join(argv), counter.unmatched(result.stdout)
            tried.append(f"{' '.join(argv)}: exit {result.returncode} {result.stderr.strip()[-120:]}".strip())
        raise PreflightError(f"host {host.name}: no device-count command of accelerator kind "
                             f"{case.hardware.spec.kind!r} ran: " + "; ".join(tried),
                             "install the vendor's tool there (on the PATH of a non-interactive SSH session), or "
                             "fix device_count of the kind")


def _raise_first(errors: list[Exception]) -> None:
    if errors:
        raise errors[0]
