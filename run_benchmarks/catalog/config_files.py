"""The schemas of accelbench's own files: test_conf, the cluster's hosts, case files and vendors' extern
configs. Each is validated whole on load (config.load_model), so an error names the file and the key."""
from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Optional, Union

from pydantic import Field, NonNegativeFloat, PositiveFloat, conint, field_validator, model_validator

from training.contract.tasks import TASKS, task_of

from run_benchmarks.catalog.config import CASE_NAME, Strict
from run_benchmarks.catalog.contention_limits import ContentionLimits
from run_benchmarks.catalog.kubernetes_spec import KubernetesSpec


class CaseEntry(Strict):
    """A test_conf ``cases:`` entry with its own extern config and settings (FlagPerf's test_conf style),
    so one ``start_task.py`` runs a vendor's whole list; a plain case name is an entry without them."""

    case: str = Field(description="case name, e.g. gpt3_6.7B:paddle_2.5.1:A100:1:8")
    extern_config: Optional[str] = Field(None, description="config name in the vendor's folder (its .yaml or "
                                                           "FlagPerf's .py), or a path to either")
    set: dict[str, Any] = Field(default_factory=dict, description="workload keys for this case, e.g. "
                                                                  "{train.micro_batch_size: 4}")

    def assignments(self) -> tuple[str, ...]:
        """``set`` as ``--set`` texts (values as JSON, which is YAML)."""
        return tuple(f"{key}={json.dumps(value)}" for key, value in self.set.items())


class TestConf(Strict):
    """``configs/test_conf.yaml``: what a run does when the command line does not say."""

    __test__ = False  # not a pytest test class, despite the name

    cases: list[Union[str, CaseEntry]] = Field(default_factory=list, description="case names run when none is "
                                                                                  "given; or {case, extern_config, set}")
    log_root: str = Field("logs", description="where run folders go; relative: inside the checkout")
    db: Optional[str] = Field(None, min_length=1, description="results store, as --db names it: a file (relative: "
                                                              "inside the checkout) or postgresql://USER@HOST:PORT/DB; "
                                                              "default <log_root>/results.db")
    timeout_s: PositiveFloat = Field(3600, allow_inf_nan=False, description="deadline for one round of one case")
    monitor_interval_s: NonNegativeFloat = Field(1.0, description="seconds between host and accelerator "
                                                                  "samples beside every node; 0 turns monitors off")
    overrides: dict[str, Any] = Field(default_factory=dict, description="workload keys applied to every case")
    contention: ContentionLimits = Field(default_factory=ContentionLimits, description=(
        "when a round counts as contended (not judged): limits on what else used the run's cores and devices "
        "over its measured steps; --set contention.KEY=VALUE changes one"))

    @field_validator("log_root")
    @classmethod
    def _relative_stays_inside(cls, log_root: str) -> str:
        if not log_root.strip():
            raise ValueError("is empty; write a folder, e.g. 'logs'")
        if not Path(log_root).is_absolute() and os.path.normpath(log_root).split(os.sep)[0] == "..":
            raise ValueError("a relative log_root must stay inside the checkout, and this one leaves it; "
                             "write 'logs' (or another folder inside), or an absolute path")
        return log_root

    def log_root_in(self, root: Path) -> Path:
        """``log_root``, relative to the checkout ``root`` unless absolute."""
        path = Path(self.log_root)
        return path if path.is_absolute() else root / path


class HostSpec(Strict):
    """One machine. ``local``: this one, with plain processes. ``ssh``: reached over SSH (paramiko), host
    key checked against ``known_hosts`` and never added, key authentication only."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    backend: Literal["local", "ssh"] = "local"
    address: str = "127.0.0.1"
    python: Optional[str] = Field(None, description="interpreter that runs the launcher; default: accelbench's own")
    port: conint(ge=1, le=65535) = Field(22, description="ssh: the SSH port")
    user: Optional[str] = Field(None, description="ssh: login user; default: the local user")
    identity_file: Optional[str] = Field(None, description="ssh: private key; default: the SSH agent and ~/.ssh keys")
    known_hosts: str = Field("~/.ssh/known_hosts", description="ssh: the host keys to trust; a host not in it "
                                                               "is refused")
    connect_timeout_s: PositiveFloat = Field(10, allow_inf_nan=False, description="ssh: give up connecting "
                                                                                    "after this long")
    work_root: str = Field("/tmp/accelbench", description="ssh: where code, configs and logs go on the host")
    data_root: Optional[str] = Field(None, description="ssh: the host's data folder, mounted read-only in the "
                                                       "container at the same path")
    docker_host: str = Field("unix:///var/run/docker.sock", description="the host's Docker engine socket")
    runtime: Literal["process", "container"] = Field(
        "process", description="container: each node runs in the vendor's image for the framework")
    devices: Optional[list[conint(ge=0)]] = Field(None, description=(
        "accelerator indices a node on this host may use, exported through the vendor's visible_devices_env "
        "(CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ...); default: all of them"))

    @model_validator(mode="after")
    def _absolute_remote_folders(self) -> "HostSpec":
        # A relative folder would be relative to wherever the SSH session or the container starts: the
        # code lands in one place, the launcher looks in another.
        if self.backend == "ssh" and not PurePosixPath(self.work_root).is_absolute():
            raise ValueError(f"host {self.name}: work_root {self.work_root!r} must be an absolute path on the "
                             "host ('~' is not expanded); write e.g. work_root: /tmp/accelbench")
        if self.data_root is not None and not PurePosixPath(self.data_root).is_absolute():
            raise ValueError(f"host {self.name}: data_root {self.data_root!r} must be an absolute path on the "
                             "host (it is mounted at the same path); write e.g. data_root: /srv/data")
        return self


_SLURM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"  # partition, account, QOS: passed as data, never as code


class SlurmContainer(Strict):
    """How a node's launcher runs in the vendor's image under Slurm, where Docker is not the site's way:
    ``pyxis`` (enroot images through ``srun --container-image``) or ``apptainer`` (``apptainer exec``)."""

    kind: Literal["pyxis", "apptainer"]
    image: str = Field(min_length=1, description="pyxis: an image reference or .sqsh file; apptainer: a .sif file")
    mounts: list[str] = Field(default_factory=list, description="extra SRC:DST mounts; the shared directory is "
                                                                "always mounted at the same path")
    options: list[str] = Field(default_factory=list, description="more options of srun (pyxis) or apptainer exec, "
                                                                 "one argument each, e.g. ['--nv']")


class SlurmSpec(Strict):
    """A Slurm cluster: one job per round, submitted with ``sbatch``, followed with ``scontrol``/``squeue``."""

    partition: str = Field(pattern=_SLURM_NAME)
    account: Optional[str] = Field(None, pattern=_SLURM_NAME)
    qos: Optional[str] = Field(None, pattern=_SLURM_NAME)
    time_limit: str = Field("01:00:00", pattern=r"^(\d+-)?\d+(:\d{1,2}){0,2}$",
                            description="sbatch --time: minutes, MM:SS, HH:MM:SS or D-HH:MM:SS")
    gpus_per_node: Optional[conint(ge=1, le=1024)] = Field(None, description="sbatch --gpus-per-node")
    gres: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9_:.,\-]+$", description="sbatch --gres, e.g. gpu:8")
    sbatch_options: list[str] = Field(default_factory=list, description="more sbatch options, one argument each, "
                                                                       "e.g. ['--exclusive', '--constraint=a100']")
    shared_dir: str = Field(description="a folder every node and this machine see at the same path: code, "
                                        "configs and logs go there")
    python: Optional[str] = Field(None, description="the interpreter on the nodes; default: accelbench's own")
    conf: Optional[str] = Field(None, description="slurm.conf for the client commands (SLURM_CONF); default: "
                                                  "the site's")
    container: Optional[SlurmContainer] = None
    exclusive: bool = Field(True, description="sbatch --exclusive: whole nodes, so no other job disturbs the "
                                              "figures")
    max_nodes: conint(ge=1, le=65536) = Field(1024, description="most nodes one case may ask for")
    poll_s: PositiveFloat = Field(0.5, allow_inf_nan=False, description="first interval between job polls; "
                                                                        "it backs off to poll_max_s")
    poll_max_s: PositiveFloat = Field(5.0, allow_inf_nan=False)

    @field_validator("sbatch_options")
    @classmethod
    def _options_not_scripts(cls, options: list[str]) -> list[str]:
        for option in options:
            if not option.startswith("-"):
                raise ValueError(f"{option!r} is not an sbatch option; write each as its own item starting with "
                                 "'-', e.g. '--exclusive' or '--constraint=a100'")
        return options

    @model_validator(mode="after")
    def _consistent(self) -> "SlurmSpec":
        if not PurePosixPath(self.shared_dir).is_absolute():
            raise ValueError(f"shared_dir {self.shared_dir!r} must be an absolute path that every node sees")
        if self.gres and self.gpus_per_node:
            raise ValueError("give gpus_per_node or gres, not both (they ask Slurm for the same devices)")
        if self.poll_max_s < self.poll_s:
            raise ValueError(f"poll_max_s {self.poll_max_s:g} is below poll_s {self.poll_s:g}")
        return self


class ClusterSpec(Strict):
    """``configs/cluster.yaml``: where a case's nodes come from. ``scheduler: hosts`` (the default): the
    listed hosts, in order. ``scheduler: slurm``: a Slurm allocation per round, described under ``slurm``."""

    scheduler: Literal["hosts", "slurm", "kubernetes"] = Field(
        "hosts", description="hosts: the host list; slurm: one sbatch job per round; kubernetes: one Indexed Job "
                             "per round")
    hosts: list[HostSpec] = Field(default_factory=list)
    slurm: Optional[SlurmSpec] = Field(None, description="scheduler slurm: partition, limits, shared directory")
    kubernetes: Optional[KubernetesSpec] = Field(None, description="scheduler kubernetes: namespace, image, "
                                                                   "shared volume")
    master_port: Union[Literal["auto"], conint(ge=1, le=65535)] = "auto"

    @field_validator("hosts")
    @classmethod
    def _unique_names(cls, hosts: list[HostSpec]) -> list[HostSpec]:
        names = [h.name for h in hosts]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"host names must be unique; repeated: {', '.join(dupes)}")
        return hosts

    @model_validator(mode="after")
    def _scheduler_has_its_section(self) -> "ClusterSpec":
        if self.scheduler == "hosts" and not self.hosts:
            raise ValueError("hosts: list at least one host (or set 'scheduler: slurm' with a 'slurm:' section)")
        if self.scheduler == "slurm" and self.slurm is None:
            raise ValueError("scheduler slurm needs a 'slurm:' section with at least partition and shared_dir")
        if self.scheduler == "hosts" and self.slurm is not None:
            raise ValueError("a 'slurm:' section is read only with 'scheduler: slurm'; add that line, or remove "
                             "the section")
        if self.scheduler == "slurm" and self.hosts:
            raise ValueError("with 'scheduler: slurm' the nodes come from Slurm; remove 'hosts:'")
        if self.scheduler == "kubernetes" and (self.kubernetes is None or self.hosts):
            raise ValueError("scheduler kubernetes needs a 'kubernetes:' section (at least shared_dir and "
                             "shared_claim) and no 'hosts:' (the nodes are pods)")
        if self.scheduler != "kubernetes" and self.kubernetes is not None:
            raise ValueError("a 'kubernetes:' section is read only with 'scheduler: kubernetes'; add that line, "
                             "or remove the section")
        return self

    def node_hosts(self) -> list[HostSpec]:
        """The hosts nodes are placed on, in order. Under Slurm every node is the one shared directory as
        this machine sees it (code and logs go there; the nodes' own names are known once the job runs)."""
        if self.scheduler == "hosts":
            return self.hosts
        if self.scheduler == "kubernetes":  # the pods' shared volume, as this machine sees it
            k8s = self.kubernetes
            return [HostSpec(name="kubernetes", backend="local", work_root=k8s.shared_dir, python=k8s.python)
                    ] * k8s.max_nodes
        slurm = self.slurm
        return [HostSpec(name="slurm", backend="local", work_root=slurm.shared_dir, python=slurm.python)
                ] * slurm.max_nodes


class CaseFile(Strict):
    """``cases/<case>/case.yaml``: the workload and its default hyper-parameters.

    ``extends: <case>`` makes a variant (e.g. a LoRA finetune of a model): the base
    case's keys apply first and this file's keys on top, so the model is written once.
    """

    description: str = ""
    extends: Optional[str] = None
    task: Optional[Literal[tuple(TASKS)]] = Field(None, description="default: pretrain")
    frameworks: Optional[list[str]] = Field(None, min_length=1)
    model: dict[str, Any] = Field(default_factory=dict)
    train: dict[str, Any] = Field(default_factory=dict)
    data: dict[str, Any] = Field(default_factory=dict)
    parallel: dict[str, Any] = Field(default_factory=dict)
    ppo: dict[str, Any] = Field(default_factory=dict, description="task ppo: the RLHF loop's knobs (training.spec.PPOSpec)")
    micro: dict[str, Any] = Field(default_factory=dict, description="task micro: the micro-benchmark "
                                                                   "(training.contract.micro.MicroSpec)")

    @field_validator("extends")
    @classmethod
    def _a_case_name(cls, extends: Optional[str]) -> Optional[str]:
        if extends is not None and not CASE_NAME.match(extends):
            raise ValueError("extends names another case (a folder under cases/), not a path; "
                             "write e.g. 'extends: gpt2_tiny'")
        return extends

    @model_validator(mode="after")
    def _complete_unless_extending(self) -> "CaseFile":
        if self.extends is None:
            # a micro-benchmark measures the device: its micro section stands where a model and train would
            trains = task_of(self.task or "pretrain").trains
            needed = ("frameworks", "model", "train") if trains else ("frameworks", "micro")
            missing = [key for key in needed if not getattr(self, key)]
            if missing:
                raise ValueError(f"a case needs {', '.join(missing)} (or 'extends: <case>' to take them from "
                                 "another case)")
        return self

    def workload_layer(self) -> dict:
        layer = {"model": self.model, "train": self.train, "data": self.data, "parallel": self.parallel}
        if self.ppo:
            layer["ppo"] = self.ppo
        if self.micro:
            layer["micro"] = self.micro
        return {**layer, "task": self.task} if self.task else layer


class ExternConfig(Strict):
    """``vendors/<vendor>/<case>/<framework>/config_<name>.yaml``: a vendor's tuning.

    What a vendor may change and stay comparable is the case's policy (cases/policy.yaml and the case's own
    policy.yaml: the layout, batch, precision, kernels ...), judged on the resolved workload at plan time
    (catalog/compliance.py). A config may set any workload section; one that changes what the policy fixes
    (the model, the optimizer, the data) still plans and runs, marked non-compliant with each departure
    named, and ``vendor check`` lists it.
    """

    description: str = ""
    model: dict[str, Any] = Field(default_factory=dict)
    train: dict[str, Any] = Field(default_factory=dict)
    data: dict[str, Any] = Field(default_factory=dict)
    parallel: dict[str, Any] = Field(default_factory=dict)
    ppo: dict[str, Any] = Field(default_factory=dict)
    micro: dict[str, Any] = Field(default_factory=dict)

    def workload_layer(self) -> dict:
        return {key: value for key in ("model", "train", "data", "parallel", "ppo", "micro")
                if (value := getattr(self, key))}
