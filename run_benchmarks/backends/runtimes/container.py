"""A node as a container on its host's Docker engine, from the vendor's image for the framework.

The image is built (or pulled) at preparation, once per engine; the framework version is checked inside
it. Launcher and monitor run in sibling containers named after the node, removed by name after the round.
"""
from __future__ import annotations

import shutil
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Optional, Sequence

from run_benchmarks.backends.runtimes import docker as containers, images
from run_benchmarks.errors import PreflightError
from run_benchmarks.backends.hosts import Job
from run_benchmarks.backends.fanout import fan_out
from run_benchmarks.catalog.vendors import FrameworkRuntime
from run_benchmarks.backends.runtimes.base import NodeRuntime, NodeSite, job_env, run_id_of
from run_benchmarks.plan import ContainerPlan

if TYPE_CHECKING:
    from run_benchmarks.plan import CasePlan, NodePlan


def docker_errors() -> tuple:
    import docker

    return (docker.errors.DockerException, OSError, RuntimeError)


def _framework_runtime(case: "CasePlan") -> FrameworkRuntime:
    return case.hardware.vendor_spec.frameworks.get(case.name.framework) or FrameworkRuntime()


class ContainerRuntime(NodeRuntime):
    name = "container"

    @classmethod
    def default_python(cls, orchestrator_python: str) -> str:
        return "python"  # the image's PATH has it

    @classmethod
    def plan_node(cls, site: NodeSite) -> ContainerPlan:
        mounts = containers.mounts_for(site.code_root, site.round_dir, site.cache_dir, site.host.data_root)
        if site.vendor_dir is not None and not PurePosixPath(site.vendor_dir).is_relative_to(site.code_root):
            mounts[str(site.vendor_dir)] = "ro"  # an installed vendor package's folder, outside the checkout
        return ContainerPlan(
            containers.container_name(site.run_id, site.case_slug, site.round_index, site.node_rank), mounts)

    def __init__(self, hosts, plan_root):
        super().__init__(hosts, plan_root)
        self.images: dict[str, images.ImageSpec] = {}  # per case name
        self.docker: dict[str, object] = {}  # per host name: its Docker SDK client

    def prepare(self, cases: Sequence["CasePlan"]) -> None:
        """The vendor's image on every host that runs a node in a container, built there if missing."""
        wanted: dict[tuple[str, str], tuple] = {}
        for case in cases:
            runtime = _framework_runtime(case)
            for node in case.rounds[0].nodes:
                if node.host.runtime != self.name:
                    continue
                key = (str(case.name), node.host.name)
                if str(case.name) not in self.images:
                    self.images[str(case.name)] = images.image_for(
                        case.hardware.vendor, case.hardware.vendor_dir, case.name.framework,
                        case.name.framework_version, runtime.image, runtime.container.build_args)
                wanted[key] = (node.host.name, self.images[str(case.name)])
        for host_name, _ in wanted.values():
            if host_name not in self.docker:
                try:  # the SDK asks the engine for its API version right here
                    self.docker[host_name] = containers.docker_client(self.hosts[host_name])
                except docker_errors() as exc:
                    raise PreflightError(f"host {host_name}: its Docker engine ({self.hosts[host_name].spec.docker_host})"
                                         f" does not answer: {exc}", "start dockerd there, or fix docker_host in the "
                                                                     "cluster config") from None
        self._sweep()
        # Hosts may share one engine (one machine, several addresses): build once per engine and image.
        engines = dict(zip(self.docker, fan_out(lambda name: self.docker[name].info()["ID"],
                                                     list(self.docker))[0]))
        jobs = {(engines.get(host_name) or host_name, image.tag): (host_name, image)
                for host_name, image in wanted.values()}
        _, errors = fan_out(lambda item: self._ensure_image(*item), list(jobs.values()))
        if errors:
            raise errors[0]

    def _sweep(self) -> None:
        """Containers of earlier runs whose orchestrator is dead: their logs kept, then removed."""
        from run_benchmarks.backends.cleanup import sweep_containers

        self.swept: list[str] = []
        for host_name, client in self.docker.items():
            try:
                self.swept += [f"host {host_name}: {line}" for line in sweep_containers(client)]
            except docker_errors():
                pass  # the image step says what is wrong with the engine

    def _ensure_image(self, host_name: str, image: images.ImageSpec) -> None:
        try:
            images.ensure_image(self.docker[host_name], image, host_name)
        except docker_errors() as exc:
            raise PreflightError(f"host {host_name}: its Docker engine ({self.hosts[host_name].spec.docker_host}) "
                                 f"does not answer: {exc}", "start dockerd there, or fix docker_host in the "
                                                            "cluster config") from None

    def port_python(self, node: "NodePlan") -> str:
        """The host's python3 (as its parent-death guard's): the containers run on the host's network
        (``network_mode="host"``), so a port free on the host is free for them; no container is started for it."""
        return "python3"

    def installed_version(self, case: "CasePlan", node: "NodePlan") -> Optional[str]:
        image = self.images[str(case.name)].tag
        try:
            return containers.distribution_version(self.docker[node.host.name], image, node.python,
                                                   case.framework.distributions)
        except docker_errors() as exc:
            raise PreflightError(f"host {node.host.name}: {node.python} does not run in image {image}: "
                                 f"{str(exc).strip()[-300:]}",
                                 "set hosts[].python to the image's interpreter (default: python "
                                 "on the image's PATH)") from None

    def start_launcher(self, case: "CasePlan", node: "NodePlan") -> Job:
        return self._run(case, node, node.container.name, node.argv, node.launcher_log)

    def start_monitor(self, case: "CasePlan", node: "NodePlan") -> Job:
        return self._run(case, node, node.container.monitor_name, node.monitor_argv, node.monitor_log)

    def _run(self, case: "CasePlan", node: "NodePlan", name: str, argv: list[str], output) -> Job:
        labels = containers.owner_labels(run_id_of(node), str(node.log_dir))
        return containers.run_node(self.docker[node.host.name], self.images[str(case.name)].tag, name, argv,
                                   job_env(node), str(node.cwd), node.container.mounts,
                                   self._options(case, node), output, labels, lambda: self._guard(node, name))

    def _guard(self, node: "NodePlan", name: str):
        """On the container's host: removes it if this orchestrator dies or loses the host first."""
        host = self.hosts[node.host.name]
        if host.spec.backend == "local" and shutil.which("docker") is None:
            return None  # no CLI to remove it with; the next run's sweep (or `accelbench clean`) does
        return host.start_guard(["docker", "-H", host.spec.docker_host, "rm", "-f", name])

    def _options(self, case: "CasePlan", node: "NodePlan"):
        """The vendor's container options, with the ``devices_if_present`` this host has (InfiniBand on
        multi-node hosts, none on a workstation) added to its devices."""
        options = _framework_runtime(case).container
        host = self.hosts[node.host.name]
        present = [device for device in options.devices_if_present if host.exists(device)]
        return options.model_copy(update={"devices": [*options.devices, *present]}) if present else options

    def cleanup(self, node: "NodePlan") -> None:
        """A finished container stays until removed: remove the node's and its monitor's, by name."""
        if node.host.name in self.docker:
            containers.remove_container(self.docker[node.host.name], node.container.name)
            containers.remove_container(self.docker[node.host.name], node.container.monitor_name)

    def describe(self, case: "CasePlan", node: "NodePlan") -> dict:
        image = self.images.get(str(case.name))
        return {"image": image.tag if image else None,
                "image_id": self._image_id(node.host.name, image.tag) if image else None}

    def _image_id(self, host_name: str, tag: str) -> Optional[str]:
        """The id of the image a node ran (hosts sharing an engine share it; each engine is asked)."""
        try:
            return self.docker[host_name].images.get(tag).id
        except (KeyError, *docker_errors()):
            return None

    def close(self) -> None:
        for client in self.docker.values():
            client.close()
        self.docker.clear()
