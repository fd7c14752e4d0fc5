"""Rendezvous ports: distinct, free, and never from the range the kernel gives to outgoing connections
(a sweep's later point once failed with its planned port taken by a client socket in between)."""
from __future__ import annotations

import random
import socket

import pytest

from run_benchmarks.planner import ports


def test_ports_are_distinct_free_and_outside_the_ephemeral_range():
    low, high = ports.ephemeral_range()
    picked = ports.free_ports(500)
    assert len(set(picked)) == 500
    assert all(not low <= p <= high and p >= ports.LOWEST for p in picked)
    assert all(ports.bindable(p) for p in picked[:20])


def test_a_port_something_listens_on_is_never_picked(monkeypatch):
    with socket.socket() as server:
        server.bind(("", 0))
        server.listen()
        taken = server.getsockname()[1]
        monkeypatch.setattr(ports, "candidate_ports", lambda _: range(taken, taken + 3))
        picked = ports.free_ports(2, random.Random(0))
        assert taken not in picked and len(picked) == 2
        with pytest.raises(RuntimeError, match="only 2 of 3"):
            ports.free_ports(3)


def test_the_ephemeral_range_falls_back_to_linuxs_default_on_an_unreadable_file(tmp_path):
    assert ports.ephemeral_range(tmp_path / "absent") == (32768, 60999)
    (tmp_path / "odd").write_text("70000 10")
    assert ports.ephemeral_range(tmp_path / "odd") == (32768, 60999)
    (tmp_path / "ok").write_text("40000\t50000\n")
    assert ports.ephemeral_range(tmp_path / "ok") == (40000, 50000)


def test_the_wider_stretch_outside_the_range_is_used():
    assert ports.candidate_ports((32768, 60999)) == range(ports.LOWEST, 32768)
    assert ports.candidate_ports((10500, 60999)) == range(61000, 65536)


def test_the_random_order_is_a_permutation_drawn_only_as_far_as_taken():
    rng = random.Random(1)
    assert sorted(ports._random_order(list(range(50)), rng)) == list(range(50))
    draws = []

    class Counting(random.Random):
        def randrange(self, *args):
            draws.append(args)
            return super().randrange(*args)

    first = next(ports._random_order(list(range(20_000)), Counting(2)))
    assert 0 <= first < 20_000 and len(draws) == 1  # one draw for one port, not 20,000 for a full shuffle
