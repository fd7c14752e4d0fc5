"""Paddle's two-rank launches, shared by every module that trains on two Paddle ranks (session fixture
``paddle_pairs``, lane inprocess).

A ``paddle.distributed.launch`` of two ranks is the dearest start of the suite (the launcher and each rank
import Paddle; ~20 s of CPU), and a process holds one fleet layout, so runs share a launch by layout
(``test_paddle.fleet_layout``), whatever their case. tests/test_paddle.py (parity: data parallel, sharding
stage1, tensor and sequence parallel, pipeline), tests/test_paddle_breakdown_launch.py (data parallel and
sharding stage1, plain and delayed), tests/test_paddle_breakdown_fleet_launch.py (TP2 plain, delayed, sequence
parallel) and tests/test_paddle_finetune_layouts.py (llama_tiny_sft's full finetune, TP2 and sharding stage1)
trained the same four layouts in nine launches; here they take four. Each module names its own runs
(``two_rank_runs``); only the modules this session collected are asked, so one file run alone launches
only its own runs. Every launch starts with one OpenMP thread per rank (test_parity.ONE_THREAD), as torchrun
starts its ranks: two threads spinning at each barrier on two shared cores only cost time.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from .runner import ROOT

if TYPE_CHECKING:
    from .parity_launch import Launch

CASE = "gpt3_tiny"
LLAMA_LIKE = {"norm": "rmsnorm", "activation": "swiglu", "position": "rotary", "bias": False,
              "tie_embeddings": False, "n_kv_head": 2, "d_ff": 344}
# The modules that train on two Paddle ranks, each with ``two_rank_runs(inputs) -> list[Run]``, in launch order.
USERS = ("test_paddle", "test_paddle_breakdown_launch", "test_paddle_breakdown_fleet_launch",
         "test_paddle_finetune_layouts")


@dataclass(frozen=True)
class ParityInputs:
    """One weights file per model (written by the torch model with the case's seed) and one token file, so
    that torch and Paddle start alike (tests/test_paddle.py)."""

    settings: tuple[str, ...]  # the shared weights and token file
    llama_settings: tuple[str, ...]  # the same for the llama-like model (LLAMA_LIKE)
    root: Path  # their folder, where a module writes inputs of its own (another case's weights)


def write_inputs(root: Path) -> ParityInputs:
    from training.contract.spec import ModelSpec
    from training.data.token_file import generate_token_dataset
    from training.torch.weights import write_initial_weights

    model = yaml.safe_load((ROOT / "cases" / CASE / "case.yaml").read_text())["model"]
    weights = write_initial_weights(ModelSpec(**model), seed=1234, path=root / "init.npz")
    llama_weights = write_initial_weights(ModelSpec(**{**model, **LLAMA_LIKE}), seed=1234, path=root / "llama.npz")
    generate_token_dataset(root / "tokens", vocab_size=model["vocab_size"], n_documents=200, seed=0)
    data = ("data.source=tokens", f"data.path={root / 'tokens'}")
    return ParityInputs((f"train.init_weights={weights}", *data),
                        (f"train.init_weights={llama_weights}", *data,
                         *(f"model.{key}={str(value).lower()}" for key, value in LLAMA_LIKE.items())), root)


@dataclass(frozen=True)
class PaddlePairs:
    inputs: ParityInputs
    launch: "Launch"  # every collected module's two-rank runs, one launch per fleet layout


@pytest.fixture(scope="session")
def paddle_inputs(tmp_path_factory) -> ParityInputs:
    return write_inputs(tmp_path_factory.mktemp("paddle_inputs"))


@pytest.fixture(scope="session")
def paddle_pairs(request, paddle_inputs, tmp_path_factory) -> PaddlePairs:
    from .parity_launch import launch
    from .test_paddle import fleet_layout
    from .test_parity import ONE_THREAD

    collected = {item.module.__name__.rsplit(".", 1)[-1] for item in request.session.items}
    runs = [run for name in USERS if name in collected
            for run in importlib.import_module(f"{__package__}.{name}").two_rank_runs(paddle_inputs)]
    done = launch(tmp_path_factory.mktemp("paddle-2"), runs, group_by=fleet_layout, env=ONE_THREAD)
    return PaddlePairs(paddle_inputs, done)
