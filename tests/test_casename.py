import pytest
from hypothesis import given, strategies as st

from run_benchmarks.catalog import casename
from run_benchmarks.errors import UserError


def test_parses_every_field():
    name = casename.parse("gpt3_6.7B:paddle_2.5.1:A100:1:8")
    assert (name.case, name.framework, name.framework_version, name.hardware) == ("gpt3_6.7B", "paddle", "2.5.1", "A100")
    assert (name.nnodes, name.nprocs_per_node, name.repeat, name.world_size) == (1, 8, 1, 8)


def test_version_and_repeat_are_optional():
    name = casename.parse("gpt2_tiny:torch:cpu:2:4:3")
    assert name.framework_version is None and name.repeat == 3 and name.world_size == 8
    assert str(name) == "gpt2_tiny:torch:cpu:2:4:3"


@pytest.mark.parametrize("text, fragment", [
    ("gpt2_tiny:torch:cpu:1", "has 4 field(s); it needs 5 or 6"),
    ("gpt2_tiny:torch:cpu:1:2:3:4", "has 7 field(s)"),
    ("gpt2_tiny:torch:cpu:one:2", "nnodes must be a whole number, got 'one'"),
    ("gpt2_tiny:torch:cpu:0:2", "nnodes must be at least 1"),
    ("gpt2_tiny:torch:cpu:1:0", "nprocs_per_node must be at least 1"),
    ("gpt2_tiny:torch:cpu:1:2:0", "repeat must be at least 1"),
    ("gpt2_tiny:torch:cpu:1:2.5", "nprocs_per_node must be a whole number"),
    (":torch:cpu:1:2", "case '' is empty"),
    ("gpt2_tiny:2.13:cpu:1:2", "framework '2.13' is not <name> or <name>_<version>"),
    ("gpt2;rm -rf /:torch:cpu:1:2", "has characters other than"),
])
def test_rejects_malformed_names_with_a_fix(text, fragment):
    with pytest.raises(UserError) as info:
        casename.parse(text)
    assert fragment in str(info.value)
    assert info.value.fix


@given(case=st.from_regex(r"[a-z][a-z0-9_.]{0,12}", fullmatch=True),
       fw=st.sampled_from(["torch", "paddle"]),
       version=st.one_of(st.none(), st.from_regex(r"[0-9]{1,2}(\.[0-9]{1,2}){0,2}", fullmatch=True)),
       nnodes=st.integers(1, 64), nprocs=st.integers(1, 16), repeat=st.integers(1, 9))
def test_format_parse_round_trip(case, fw, version, nnodes, nprocs, repeat):
    name = casename.CaseName(case, fw, version, "A100", nnodes, nprocs, repeat)
    assert casename.parse(str(name)) == name


@pytest.mark.parametrize("requested, installed, ok", [
    ("2.13", "2.13.0+cpu", True),
    ("2.13.0", "2.13.0", True),
    ("2", "2.13.0", True),
    ("2.1", "2.13.0", False),
    ("2.13.1", "2.13.0+cu126", False),
    ("3.3.1", "3.3.1", True),
])
def test_version_matching_is_per_component(requested, installed, ok):
    assert casename.version_matches(requested, installed) is ok
