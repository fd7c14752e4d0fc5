"""The kubeconfig read as data before the Kubernetes client sees it, and the commands it would make it run.

A kubeconfig is a file accelbench is handed, and it can name commands: a user's ``exec`` credential plugin
(``aws eks get-token``, ``gke-gcloud-auth-plugin``, ``kubelogin``) and a gcp ``auth-provider``'s ``cmd-path``,
which the official client runs while it loads the file. Those are how real clusters authenticate, so they
are not refused; they are named (the dry run and the run print them with their arguments) and run only when
the user said so: ``kubernetes.allow_exec`` in the cluster file lists the command exactly as the kubeconfig
names it, or ``--allow-kubeconfig-exec`` allows any. Otherwise preflight stops (exit 2) before the client is
built, naming the command and both ways to allow it.

Every file of the kubeconfig (a ``$KUBECONFIG`` list too) is read as any config is (catalog/yaml_files.py:
1 MiB cap, regular files only, plain YAML: no tags, aliases or deep nesting), and the client is then built
from this reading, merged as the client merges files (the first entry of a name wins, the last
current-context wins), so what was checked is what it loads. A refreshed gcp token is not written back into
the user's file (the client would by default): the next run asks again.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from run_benchmarks.catalog.kubernetes_spec import KubernetesSpec
from run_benchmarks.catalog.yaml_files import load_yaml
from run_benchmarks.errors import PreflightError, UserError

SECTIONS = ("clusters", "contexts", "users")
FIX_FILE = ("set kubernetes.kubeconfig (and context) in the cluster file to a working kubeconfig; kubectl "
            "cluster-info with it should answer")


@dataclass(frozen=True)
class Credential:
    """A command the client would run for the credentials of the context in use."""

    file: str   # the kubeconfig file that names it
    user: str   # its users[] entry
    how: str    # "exec credential plugin" or "gcp auth-provider cmd-path"
    argv: tuple[str, ...]

    @property
    def command(self) -> str:
        return self.argv[0]

    def words(self) -> str:
        return f"{shlex.join(self.argv)} (the {self.how} of user {self.user!r}, in {self.file})"


@dataclass(frozen=True)
class Kubeconfig:
    files: tuple[tuple[str, dict], ...]  # (path, its data), in the order the client merges them
    context: Optional[str]               # the context in use: the cluster file's, else the current one
    credentials: tuple[Credential, ...]

    @property
    def paths(self) -> str:
        return os.pathsep.join(path for path, _ in self.files)


def _entries(data: dict, section: str, path: str) -> list[dict]:
    listed = data.get(section)
    if listed is None:
        return []
    if not isinstance(listed, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str)
                                               for e in listed):
        raise UserError(f"{path}: {section} is not a list of entries each with a name; not a kubeconfig",
                        FIX_FILE)
    return listed


def read_file(path: str) -> dict:
    """One kubeconfig file as a mapping, through the bounded config reader."""
    data = load_yaml(Path(path))
    if not data:
        raise UserError(f"{path}: an empty kubeconfig", FIX_FILE)
    for section in SECTIONS:
        _entries(data, section, path)
    return data


def _first(files: tuple[tuple[str, dict], ...], section: str, name: Any) -> Optional[tuple[str, dict]]:
    for path, data in files:
        for entry in _entries(data, section, path):
            if entry["name"] == name:
                return path, entry
    return None


def _credentials(files: tuple[tuple[str, dict], ...], context: Optional[str]) -> tuple[Credential, ...]:
    """The commands the client runs for the user of ``context`` (the client's own rules, kube_config.py)."""
    found_context = _first(files, "contexts", context) if context is not None else None
    said = found_context[1].get("context") if found_context else None
    user_name = said.get("user") if isinstance(said, dict) else None
    found_user = _first(files, "users", user_name) if isinstance(user_name, str) else None
    if found_user is None or not isinstance(found_user[1].get("user"), dict):
        return ()
    path, user = found_user[0], found_user[1]["user"]
    commands = []
    provider = user.get("auth-provider")
    config = provider.get("config") if isinstance(provider, dict) else None
    if isinstance(provider, dict) and provider.get("name") == "gcp" and isinstance(config, dict) \
            and isinstance(config.get("cmd-path"), str) and config["cmd-path"]:
        if "cmd-args" in config:  # the client: cmd-path is the program, cmd-args split on whitespace
            argv = (config["cmd-path"], *str(config["cmd-args"]).split())
        else:
            argv = tuple(config["cmd-path"].split())
        commands.append(Credential(path, user_name, "gcp auth-provider cmd-path", argv))
    plugin = user.get("exec")
    if isinstance(plugin, dict) and isinstance(plugin.get("command"), str) and plugin["command"]:
        args = plugin.get("args") or []
        argv = (plugin["command"], *(str(a) for a in (args if isinstance(args, list) else [args])))
        commands.append(Credential(path, user_name, "exec credential plugin", argv))
    return tuple(commands)


def read(location: str, context: Optional[str] = None) -> Kubeconfig:
    """The kubeconfig at ``location`` (one path, or a list joined by os.pathsep: the files that exist)."""
    paths = [os.path.expanduser(p) for p in location.split(os.pathsep) if p]
    present = [p for p in paths if os.path.lexists(p)] if len(paths) > 1 else paths
    if not present:
        raise UserError(f"no kubeconfig file of {location!r} exists", FIX_FILE)
    files = tuple((path, read_file(path)) for path in present)
    current = None
    for _, data in files:
        if "current-context" in data:
            current = data["current-context"]
    chosen = context if context is not None else current if isinstance(current, str) else None
    return Kubeconfig(files, chosen, _credentials(files, chosen))


def unallowed(config: Kubeconfig, spec: KubernetesSpec) -> list[Credential]:
    return [c for c in config.credentials if spec.exec_allowed_by(c.command) is None]


def opt_in_words(credential: Credential) -> str:
    return (f"if you trust it, list it in the cluster file: kubernetes: allow_exec: [{credential.command}] "
            "(matched as the kubeconfig names it), or pass --allow-kubeconfig-exec")


def refuse_unallowed(config: Kubeconfig, spec: KubernetesSpec) -> None:
    """Preflight's stop: a command the user has not allowed is named, with the two ways to allow it."""
    refused = unallowed(config, spec)
    if refused:
        first = refused[0]
        more = f" (and {len(refused) - 1} more: {', '.join(c.command for c in refused[1:])})" if refused[1:] else ""
        raise PreflightError(f"the kubeconfig would make the Kubernetes client run {first.words()}{more} to get "
                             "credentials; accelbench runs no command a kubeconfig names unless you allow it, and "
                             "nothing was started", opt_in_words(first))


def described(config: Optional[Kubeconfig], spec: KubernetesSpec) -> list[str]:
    """The dry run's and the run's lines: which kubeconfig, and each command it runs and whether allowed."""
    if config is None:
        return ["kubeconfig: none found: the in-cluster service account (runs no command)"]
    lines = [f"kubeconfig: {config.paths} (context {config.context or '(none)'})"]
    if not config.credentials:
        lines.append("  it runs no command for credentials")
    for credential in config.credentials:
        allowed = spec.exec_allowed_by(credential.command)
        lines.append(f"  runs {credential.words()} for credentials: "
                     + (f"allowed by {allowed}" if allowed else "NOT allowed: the run stops at preflight; "
                        + opt_in_words(credential)))
    return lines


def client_from(config: Kubeconfig, kubernetes) -> Any:
    """An ApiClient from the reading (merged as KubeConfigMerger merges files); the allowed commands run here."""
    import copy

    from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader

    first_path, first = config.files[0]
    merged = copy.deepcopy(first)
    for section in SECTIONS:
        merged[section] = []
    node = ConfigNode(first_path, merged, first_path)
    for path, data in config.files:
        for section in SECTIONS:
            for entry in _entries(data, section, path):
                if not any(e["name"] == entry["name"] for e in node.value[section]):
                    node.value[section].append(ConfigNode(f"{path}/{entry}", copy.deepcopy(entry), path))
        if "current-context" in data:
            node.value["current-context"] = data["current-context"]
    configuration = type.__call__(kubernetes.client.Configuration)
    KubeConfigLoader(config_dict=node, active_context=config.context, config_base_path=None).load_and_set(
        configuration)
    return kubernetes.client.ApiClient(configuration=configuration)
