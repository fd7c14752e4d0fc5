"""A kubeconfig is a received file (issue 43): the commands it names for credentials (a user's exec plugin, a
gcp auth-provider's cmd-path) run only with the user's opt-in, the dry run names them, and a hostile file (a
YAML tag, 100,000-deep nesting, a FIFO, /dev/zero, 10 MB) is refused like any config, fast, naming it.

The CLI runs in this process against the API stand-in of tests/infra/k8s_api.py (the ``standin`` fixture of
tests/test_kubernetes.py), except where a file could block or Python's own log format is what is checked:
those run the CLI as a process, bounded in time. Every credential command here is a script that leaves a
marker file: no marker may appear unless the test allowed it.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("kubernetes")

from .conftest import write  # noqa: E402
from .hostile import Outside, refused  # noqa: E402
from .runner import run_cli  # noqa: E402
from .test_hostile_inputs import run_bounded  # noqa: E402
from .test_kubernetes import CASE, completes, standin  # noqa: E402,F401 - standin: the fixture

TOKEN = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {"token": "t"}}
GCP_TOKEN = {"credential": {"access_token": "t", "token_expiry": "2099-01-01T00:00:00Z"}}  # gcloud config-helper's


def credential_script(folder: Path, code: int = 0, output: dict = TOKEN) -> tuple[Path, Path]:
    """A credential command as a plugin would be: prints a token (or fails with ``code``); leaves a marker."""
    marker = folder / "MARKER-ran"
    script = write(folder / "get-token", f"#!/bin/sh\ntouch {marker}\necho '{json.dumps(output)}'\nexit {code}\n")
    script.chmod(0o755)
    return script, marker


def kubeconfig(path: Path, server: str, user: dict) -> Path:
    return write(path, json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": user}]}))


def exec_user(script: Path) -> dict:
    return {"exec": {"apiVersion": TOKEN["apiVersion"], "command": str(script), "args": ["--region", "eu west"]}}


def planted(standin, tmp_path: Path, user=None):
    """(the API stand-in, the credential script, its marker, a kubeconfig whose user runs it: ``user``'s way)."""
    api = standin(completes)
    script, marker = credential_script(tmp_path)
    return api, script, marker, kubeconfig(tmp_path / "kubeconfig", api.url, (user or exec_user)(script))


def gcp_user(script: Path) -> dict:
    return {"auth-provider": {"name": "gcp", "config": {"cmd-path": f"{script} config config-helper",
                                                          "token-key": "{.credential.access_token}"}}}


@pytest.mark.parametrize("user", [exec_user, gcp_user], ids=["exec-plugin", "gcp-cmd-path"])
def test_a_credential_command_stops_the_run_at_preflight_naming_it_and_the_opt_in(accelbench, standin, tmp_path,
                                                                                 user):
    outside = Outside(tmp_path)
    api, script, marker, config = planted(standin, tmp_path, user)
    err = refused(accelbench("run", CASE, "--timeout", "30", "--cluster", api.cluster_file(kubeconfig=str(config))),
                  f"the kubeconfig would make the Kubernetes client run {script}", "to get credentials",
                  f"kubernetes: allow_exec: [{script}]", "--allow-kubeconfig-exec", str(config))
    assert ("--region 'eu west'" if user is exec_user else "config config-helper") in err
    assert not marker.exists() and api.cluster.jobs == {} and not (tmp_path / "shared" / "code").exists()
    outside.unchanged()


def test_the_dry_run_names_the_command_with_its_arguments_and_runs_nothing(accelbench, standin, tmp_path):
    outside = Outside(tmp_path)
    api, script, marker, config = planted(standin, tmp_path)
    said = f"runs {script} --region 'eu west' (the exec credential plugin of user 'u', in {config}) for credentials"
    plain = accelbench("run", CASE, "--dry-run", "--cluster", api.cluster_file(kubeconfig=str(config)))
    assert plain.returncode == 0 and said in plain.stdout, plain.stdout[-3000:]
    assert f"kubeconfig: {config} (context c)" in plain.stdout
    assert "NOT allowed: the run stops at preflight" in plain.stdout
    listed = accelbench("run", CASE, "--dry-run", "--cluster",
                        api.cluster_file(kubeconfig=str(config), allow_exec=[str(script)]))
    assert f"{said}: allowed by kubernetes.allow_exec of the cluster file" in listed.stdout
    flagged = accelbench("run", CASE, "--dry-run", "--allow-kubeconfig-exec", "--cluster",
                         api.cluster_file(kubeconfig=str(config)))
    assert f"{said}: allowed by --allow-kubeconfig-exec" in flagged.stdout
    assert not marker.exists() and api.cluster.requests == []  # the dry run reached no API either
    outside.unchanged()


def test_allow_exec_is_matched_exactly_as_the_kubeconfig_names_the_command(accelbench, standin, tmp_path):
    outside = Outside(tmp_path)
    api, script, marker, config = planted(standin, tmp_path)
    near = api.cluster_file(kubeconfig=str(config), allow_exec=[script.name, f"{script}/"])  # not the same text
    refused(accelbench("run", CASE, "--timeout", "30", "--cluster", near), f"allow_exec: [{script}]")
    assert not marker.exists()
    done = accelbench("run", CASE, "--timeout", "30", "--cluster",
                      api.cluster_file(kubeconfig=str(config), allow_exec=[str(script)]))
    assert done.returncode == 0, done.stderr[-3000:]
    assert marker.exists() and done.results()[0]["status"] == "ok"
    assert f"accelbench: the kubeconfig runs {script} --region 'eu west'" in done.stderr
    assert "allowed by kubernetes.allow_exec of the cluster file" in done.stderr
    outside.unchanged()


def test_the_flag_allows_a_gcp_cmd_path_for_this_invocation(accelbench, standin, tmp_path):
    api = standin(completes)
    script, marker = credential_script(tmp_path, output=GCP_TOKEN)
    config = kubeconfig(tmp_path / "kubeconfig", api.url, gcp_user(script))
    done = accelbench("run", CASE, "--timeout", "30", "--allow-kubeconfig-exec", "--cluster",
                      api.cluster_file(kubeconfig=str(config)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert marker.exists() and "allowed by --allow-kubeconfig-exec" in done.stderr
    assert json.loads(config.read_text())["users"][0]["user"]["auth-provider"]["config"].get("access-token") is None


def test_the_clients_own_log_lines_are_accelbench_warnings(tmp_path):
    """A plugin that fails: the client logs with ``logging.error`` (Python's ``ERROR:root:`` format, had no
    handler been set) and urllib3 logs its retries; both print as accelbench's warnings. As a process: the
    format Python gives a log line with no handler is what is checked."""
    script, marker = credential_script(tmp_path, code=3)
    config = kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1", exec_user(script))
    cluster = write(tmp_path / "k8s.yaml", "scheduler: kubernetes\nkubernetes: {namespace: bench, kubeconfig: "
                                           f"{config}, image: reg.example/t:1, shared_dir: {tmp_path / 'shared'}, "
                                           "shared_claim: c}\n")
    done = run_cli(tmp_path, "run", CASE, "--cluster", str(cluster), "--allow-kubeconfig-exec", timeout=120)
    err = done.stderr
    assert done.returncode == 2 and "Traceback" not in err, err[-3000:]
    assert "accelbench: warning: kubernetes client: exec: process returned 3" in err
    assert "accelbench: warning: urllib3.connectionpool: Retrying" in err
    assert "ERROR:root:" not in err and "WARNING:urllib3" not in err
    assert "the Kubernetes API at http://127.0.0.1:1 does not answer" in err and marker.exists()


# ---------------------------------------------------------------- hostile kubeconfig files


def _tagged(path: Path, marker: Path) -> Path:
    return write(path, f"apiVersion: v1\nkind: Config\nusers: !!python/object/apply:os.system ['touch {marker}']\n")


HOSTILE = {  # what the file is, what the refusal says
    "yaml-tag": (_tagged, "could not determine a constructor for the tag"),
    "nested-100000": (lambda path, marker: write(path, "users: " + "[" * 100_000 + "]" * 100_000 + "\n"),
                      "nesting depth"),  # libyaml stops at its own limit
    "dev-zero": (lambda path, marker: Path("/dev/zero"), "is a device, not a config file"),
    "fifo": (lambda path, marker: (os.mkfifo(path), path)[1], "is a named pipe (FIFO), not a config file"),
    "10-mb": (lambda path, marker: write(path, "# " + "x" * (10 << 20) + "\n"),
              "a config file's size is 10,485,763 bytes, over the cap of 1,048,576 bytes"),
}


def _cluster(tmp_path: Path, kubeconfig_path: Path | None) -> Path:
    named = f"kubeconfig: {kubeconfig_path}, " if kubeconfig_path else ""
    return write(tmp_path / "k8s.yaml", f"scheduler: kubernetes\nkubernetes: {{namespace: bench, {named}image: "
                                        f"reg.example/t:1, shared_dir: {tmp_path / 'shared'}, shared_claim: c}}\n")


@pytest.mark.parametrize("name", ["yaml-tag", "nested-100000", "10-mb"])
def test_a_hostile_kubeconfig_is_refused_like_any_config_naming_it(accelbench, tmp_path, name):
    outside = Outside(tmp_path)
    marker = tmp_path / "MARKER-tag"
    make, says = HOSTILE[name]
    path = make(tmp_path / "kubeconfig", marker)
    cluster = _cluster(tmp_path, path)
    for extra in (["--dry-run"], []):  # the dry run reads it too, to name its commands
        refused(accelbench("run", CASE, "--cluster", cluster, *extra, env={"HOME": str(tmp_path)}),
                f"accelbench: error: {path}", says)
    assert not marker.exists() and not (tmp_path / "logs").exists()
    outside.unchanged()


@pytest.mark.parametrize("name", ["dev-zero", "fifo"])
@pytest.mark.parametrize("named_by", ["cluster-file", "KUBECONFIG"])
def test_a_kubeconfig_that_never_ends_is_refused_at_once(tmp_path, name, named_by):
    """As a process, bounded at 20 s and 400 MiB: a FIFO must not block, /dev/zero must not be read."""
    outside = Outside(tmp_path)
    make, says = HOSTILE[name]
    path = make(tmp_path / "kubeconfig", None)
    cluster = _cluster(tmp_path, path if named_by == "cluster-file" else None)
    env = {"HOME": str(tmp_path), **({"KUBECONFIG": str(path)} if named_by == "KUBECONFIG" else {})}
    code, out, err, took = run_bounded(["run", CASE, "--cluster", str(cluster), "--log-root", str(tmp_path / "logs")],
                                       tmp_path, limit_s=20, env=env)
    assert code == 2 and "Traceback" not in err and took < 20, (code, err[-2000:])
    assert f"accelbench: error: {path}" in err and says in err, err[-2000:]
    assert not (tmp_path / "logs").exists()
    outside.unchanged()


def test_a_kubeconfig_list_refuses_a_hostile_member_among_good_ones(accelbench, standin, tmp_path):
    api = standin(completes)
    good = kubeconfig(tmp_path / "good", api.url, {})
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    listed = os.pathsep.join([str(good), str(tmp_path / "absent"), str(fifo)])
    refused(accelbench("run", CASE, "--timeout", "30", "--cluster", api.cluster_file(kubeconfig=listed)),
            f"{fifo}: is a named pipe (FIFO)")
    assert api.cluster.jobs == {}
    assert sys.modules.get("kubernetes") is not None  # the client was importable: the refusal is accelbench's
