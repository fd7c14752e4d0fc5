"""copy_node_folder / copy_regular_file: what a job left on the shared volume comes into the run folder as
regular files only (no link followed or copied, no device read), within limits.NODE_LOG_BYTES."""
from __future__ import annotations

import os

import pytest

from run_benchmarks.backends.schedulers.shared_copy import copy_node_folder, copy_regular_file


@pytest.fixture
def shared(tmp_path):
    node = tmp_path / "shared" / "node0"
    (node / "ranks").mkdir(parents=True)
    (node / "launcher.log").write_text("ok\n")
    (node / "ranks" / "rank0.stdout.log").write_text("step 1\n")
    secret = tmp_path / "home" / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_text("PRIVATE KEY")
    os.symlink(secret, node / "stolen_key")
    os.symlink("/dev/zero", node / "ranks" / "endless.log")
    os.symlink(secret.parent, node / "linked_dir")
    return node


def test_only_regular_files_are_copied_no_link_followed_or_kept(shared, tmp_path):
    target = tmp_path / "run" / "node0"
    copy_node_folder(shared, target)
    copied = sorted(str(p.relative_to(target)) for p in target.rglob("*"))
    assert copied == ["launcher.log", "ranks", "ranks/rank0.stdout.log"]
    assert (target / "launcher.log").read_text() == "ok\n"


def test_past_the_cap_nothing_is_copied_and_the_refusal_names_the_variable(shared, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELBENCH_MAX_NODE_LOG_BYTES", "5")  # the two logs hold 10 bytes
    target = tmp_path / "run" / "node0"
    with pytest.raises(OSError, match="ACCELBENCH_MAX_NODE_LOG_BYTES"):
        copy_node_folder(shared, target)
    assert not target.exists()


def test_a_node_folder_replaced_by_a_link_is_refused(shared, tmp_path):
    link = tmp_path / "shared" / "node1"
    os.symlink(shared, link)
    with pytest.raises(OSError, match="not a folder"):
        copy_node_folder(link, tmp_path / "run" / "node1")


def test_a_single_file_is_copied_only_when_regular(shared, tmp_path):
    assert copy_regular_file(shared / "launcher.log", tmp_path / "a.log") is True
    assert copy_regular_file(shared / "stolen_key", tmp_path / "b.log") is False
    assert copy_regular_file(shared / "missing", tmp_path / "c.log") is False
    assert sorted(p.name for p in tmp_path.glob("*.log")) == ["a.log"]
