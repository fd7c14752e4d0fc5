"""The schemas of accelbench's own files: test_conf, the cluster's hosts, case files and vendors' extern
configs. Each is validated whole on load (config.load_model), so an error names the file and the key."""
from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Optional, Union

from pydantic import Field, NonNegativeFloat, PositiveFloat, conint, field_validator, model_validator

from .config import CASE_NAME, Strict


class CaseEntry(Strict):
    """A test_conf ``cases:`` entry with its own extern config and settings (FlagPerf's test_conf style),
    so one ``start_task.py`` runs a vendor's whole list; a plain case name is an entry without them."""

    case: str = Field(description="case name, e.g. gpt3_6.7B:paddle_2.5.1:A100:1:8")
    extern_config: Optional[str] = Field(None, description="config name in the vendor's folder, or a YAML path")
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
    timeout_s: PositiveFloat = Field(3600, allow_inf_nan=False, description="deadline for one round of one case")
    monitor_interval_s: NonNegativeFloat = Field(1.0, description="seconds between host and accelerator "
                                                                  "samples beside every node; 0 turns monitors off")
    overrides: dict[str, Any] = Field(default_factory=dict, description="workload keys applied to every case")

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


class ClusterSpec(Strict):
    """``configs/cluster.yaml``: the hosts a case's nodes are placed on, in order."""

    hosts: list[HostSpec] = Field(min_length=1)
    master_port: Union[Literal["auto"], conint(ge=1, le=65535)] = "auto"

    @field_validator("hosts")
    @classmethod
    def _unique_names(cls, hosts: list[HostSpec]) -> list[HostSpec]:
        names = [h.name for h in hosts]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"host names must be unique; repeated: {', '.join(dupes)}")
        return hosts


class CaseFile(Strict):
    """``cases/<case>/case.yaml``: the workload and its default hyper-parameters.

    ``extends: <case>`` makes a variant (e.g. a LoRA finetune of a model): the base
    case's keys apply first and this file's keys on top, so the model is written once.
    """

    description: str = ""
    extends: Optional[str] = None
    task: Optional[Literal["pretrain", "finetune", "lora", "ppo"]] = Field(None, description="default: pretrain")
    frameworks: Optional[list[str]] = Field(None, min_length=1)
    model: dict[str, Any] = Field(default_factory=dict)
    train: dict[str, Any] = Field(default_factory=dict)
    data: dict[str, Any] = Field(default_factory=dict)
    parallel: dict[str, Any] = Field(default_factory=dict)
    ppo: dict[str, Any] = Field(default_factory=dict, description="task ppo: the RLHF loop's knobs (training.spec.PPOSpec)")

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
            missing = [key for key in ("frameworks", "model", "train") if not getattr(self, key)]
            if missing:
                raise ValueError(f"a case needs {', '.join(missing)} (or 'extends: <case>' to take them from "
                                 "another case)")
        return self

    def workload_layer(self) -> dict:
        layer = {"model": self.model, "train": self.train, "data": self.data, "parallel": self.parallel}
        if self.ppo:
            layer["ppo"] = self.ppo
        return {**layer, "task": self.task} if self.task else layer


# What a vendor may not change (docs/vendor-onboarding.md, "Fair comparison"): the measured steps, the
# optimizer, the starting point and the adapters the task defines belong to the case.
CASE_OWNED_TRAIN_KEYS = {"steps": "the step count", "warmup_steps": "the warm-up steps", "lr": "the optimizer",
                         "weight_decay": "the optimizer", "seed": "the initialisation",
                         "init_weights": "the initial weights", "lora_rank": "the task's adapters",
                         "lora_alpha": "the task's adapters", "lora_targets": "the task's adapters"}


class ExternConfig(Strict):
    """``vendors/<vendor>/<case>/<framework>/config_<name>.yaml``: a vendor's tuning.

    A vendor may tune the batch, precision and parallel layout; the model and the
    data belong to the case, so a comparison across vendors stays fair.
    """

    description: str = ""
    train: dict[str, Any] = Field(default_factory=dict)
    parallel: dict[str, Any] = Field(default_factory=dict)

    @field_validator("train")
    @classmethod
    def _no_case_owned_keys(cls, train: dict) -> dict:
        for key, what in CASE_OWNED_TRAIN_KEYS.items():
            if key in train:
                raise ValueError(f"a vendor config may not change {what} (fair comparison); remove '{key}'")
        return train

    def workload_layer(self) -> dict:
        return {"train": self.train, "parallel": self.parallel}
