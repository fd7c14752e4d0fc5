"""What a stored round ran, read back from its row: the workload hash that groups rounds, the layout key
that pairs two vendors' rounds, and the layout and batch facts that tell rows apart.

One place for report, compare and exports, so the three never disagree about which rounds are "the same".
The facts come from the resolved workload the round stored (``rounds/workload.py`` computes them; nothing here
re-derives a degree or a batch). A row without a workload (an import, a store written before workloads
were stored) has no hash: it is grouped by its case columns as before, and its only fact is the precision
column the store keeps for every row.

A stored workload is read as the schema it was written with: the changes to ``WorkloadSpec`` since are
applied by ``WORKLOAD_MIGRATIONS``, each named, and then today's schema reads it. One that still does not
fit (a change no migration names yet) is never emptied: it keeps the hash stored with it and the facts it
states, as stored, and says so (``RoundFacts.note``, shown as a flag on its report row).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from pydantic import ValidationError

from training.contract.tasks import task_of
from training.contract.spec import WorkloadSpec

from run_benchmarks.catalog.casename import CaseName
from run_benchmarks.results.store.schema import Attempt
from run_benchmarks.results.rounds.workload import layout_facts, layout_key, resolved_workload, workload_hash

# (fact, short column heading): the layout and batch facts a reader tells rows apart by, in table order.
FACT_COLUMNS = (
    ("data_parallel", "dp"),
    ("tensor_parallel", "tp"),
    ("pipeline_parallel", "pp"),
    ("sharding", "sharding"),
    ("sharding_degree", "shard deg"),
    ("sequence_parallel", "seq par"),
    ("micro_batch_size", "micro batch"),
    ("gradient_accumulation_steps", "accum"),
    ("global_batch_samples", "global batch"),
    ("global_batch_tokens", "global tokens"),
    ("precision", "precision"),
    ("data_source", "data"),
)
FACT_KEYS = tuple(k for k, _ in FACT_COLUMNS)
FACT_LABEL = dict(FACT_COLUMNS)
# Facts that pair rows in a compare beyond the columns above: same model length, same task and layout size.
MATCH_FACTS = FACT_KEYS + ("nnodes", "nprocs_per_node", "seq_len", "recompute", "offload", "task")


@dataclass(frozen=True)
class RoundFacts:
    """``workload_hash``/``layout_key`` are None for a row without a readable workload."""
    workload_hash: Optional[str]
    layout_key: Optional[str]
    facts: dict[str, Any] = field(default_factory=dict)
    spec: Optional[dict] = None  # the workload as stored (model_dump), for the settings no fact names
    note: str = ""  # why the facts are read as stored (a workload today's schema does not read)


# The changes to the stored workload's schema, oldest first: (what changed, stored dict -> the next schema's).
# Settings added with a default an older workload reads as it is need none; a default that changed does.


def _uniform_before_markov(stored: dict) -> dict:
    """Synthetic tokens were uniform until data.synthetic (default markov) existed; every workload stored
    since holds the key (rounds store the full dump), so one without it on a synthetic source is uniform."""
    data = stored.get("data")
    if isinstance(data, dict) and data.get("source", "synthetic") == "synthetic" and "synthetic" not in data:
        return {**stored, "data": {**data, "synthetic": "uniform"}}
    return stored


WORKLOAD_MIGRATIONS: tuple[tuple[str, Callable[[dict], dict]], ...] = (
    ("data.synthetic added, default markov (uniform before)", _uniform_before_markov),
)
# Facts that are settings the worker was handed (read from a stored workload as it is, whatever its schema);
# the others (data_parallel, sharding_degree, global batch) are derived by the schema's rules (rounds/workload.py).
STATED = {"tensor_parallel": ("parallel", "tensor_parallel_degree"),
          "pipeline_parallel": ("parallel", "pipeline_parallel_degree"), "sharding": ("parallel", "sharding"),
          "sequence_parallel": ("parallel", "sequence_parallel"), "offload": ("parallel", "offload"),
          "micro_batch_size": ("train", "micro_batch_size"),
          "gradient_accumulation_steps": ("train", "gradient_accumulation_steps"),
          "seq_len": ("model", "seq_len"), "precision": ("train", "precision"), "recompute": ("train", "recompute"),
          "data_source": ("data", "source")}


def case_name_of(attempt: Attempt) -> CaseName:
    return CaseName(attempt["case"], attempt["framework"], attempt.get("framework_version") or None,
                    attempt["hardware"], int(attempt["nnodes"]), int(attempt["nprocs_per_node"]),
                    int(attempt.get("repeat") or 1))


def migrated(stored: dict) -> dict:
    for _change, migrate in WORKLOAD_MIGRATIONS:
        stored = migrate(stored)
    return stored


def round_facts(attempt: Attempt) -> RoundFacts:
    stored = attempt.get("workload")
    if not (isinstance(stored, dict) and "model" in stored):
        precision = attempt.get("precision")
        facts = {"precision": precision} if precision else {}
        return RoundFacts(None, None, {**facts, **import_overrides(attempt)})
    name = case_name_of(attempt)
    try:
        spec = WorkloadSpec.model_validate(migrated(stored))
    except ValidationError as exc:
        return as_stored(attempt, name, stored, exc)
    resolved = resolved_workload(name, spec)
    facts = layout_facts(name, spec)
    if not task_of(spec.task).trains:  # no batch: its model and train sections are placeholders no worker reads
        facts = {"data_parallel": facts.get("data_parallel"), "task": "micro"}
    return RoundFacts(workload_hash(resolved), layout_key(resolved), facts,
                      spec.model_dump(mode="json", exclude_defaults=True))


def import_overrides(attempt: Attempt) -> dict[str, Any]:
    """An import's ``--set`` overrides of its case (``metrics["overrides"]``), as dotted settings: imports
    store no workload, so these are what tells two imports of one case apart (rows, columns, compare)."""
    stored = (attempt.get("metrics") or {}).get("overrides")
    return {str(k): v for k, v in stored.items()} if isinstance(stored, dict) else {}


def settings_key(facts: dict) -> tuple:
    """The dotted settings of a row without a workload (an import's overrides), for grouping and pairing."""
    return tuple(sorted((k, repr(v)) for k, v in facts.items() if "." in k))


def as_stored(attempt: Attempt, name: CaseName, stored: dict, exc: ValidationError) -> RoundFacts:
    """A workload today's schema does not read, even migrated: its hash, the facts it states, and why. No layout key: pairing across vendors needs the
    schema's reading of both sides."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    facts = {"nnodes": name.nnodes, "nprocs_per_node": name.nprocs_per_node, "world_size": name.world_size,
             "task": stored.get("task", "pretrain")}
    for fact, (section, key) in STATED.items():
        value = (stored.get(section) or {}).get(key)
        if value is not None:
            facts[fact] = value
    note = (f"workload stored by another accelbench: today's schema refuses {where} ({first['msg']}); its facts "
            "are read as stored, derived ones (data parallel, global batch) left out")
    # The hash stored with it; a row from before rows held one: a hash of the workload as stored, which groups
    # the rounds that ran the same one and never meets a hash today's schema computes.
    stored_hash = attempt.get("workload_hash") or workload_hash({"case_name": str(name), "stored": stored})
    return RoundFacts(stored_hash, None, facts, stored, note)


def differing(fact_dicts: Sequence[dict], keys: Sequence[str] = FACT_KEYS) -> list[str]:
    """The fact keys whose values are not the same in every dict (a missing fact counts as a value): the
    columns a table needs so that two of its rows never look alike."""
    return [k for k in keys if len({repr(d.get(k)) for d in fact_dicts}) > 1]


def fact_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


# Workload settings a fact above already shows (or derives from): never a second column.
SHOWN_BY_FACTS = {"parallel.tensor_parallel_degree", "parallel.pipeline_parallel_degree", "parallel.sharding",
                  "parallel.sharding_parallel_degree", "parallel.sequence_parallel", "parallel.offload",
                  "train.micro_batch_size", "train.gradient_accumulation_steps", "train.precision",
                  "train.recompute", "model.seq_len", "data.source", "task"}


def flat_settings(spec: Optional[dict]) -> dict[str, Any]:
    """The stored workload as ``train.steps: 15`` pairs, less what a fact shows (SHOWN_BY_FACTS)."""
    out: dict[str, Any] = {}

    def walk(tree: dict, prefix: str) -> None:
        for key, value in tree.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            elif f"{prefix}{key}" not in SHOWN_BY_FACTS:
                out[f"{prefix}{key}"] = value if not isinstance(value, list) else tuple(value)
    walk(spec or {}, "")
    return out


def varying_settings(rows: Sequence) -> list[str]:
    """The columns that tell ``rows`` (CaseSummary-like: ``facts``, ``label``, ``config``) apart: the
    differing facts, then every other workload setting (``train.steps``) that differs between two rows of
    one case and config, which would otherwise look alike. Settings that differ only between cases (two
    models' sizes) are the case column's business."""
    keys = differing([r.facts for r in rows])
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((getattr(r, "label", ""), getattr(r, "config", "")), []).append(r.facts)
    for members in groups.values():
        if len(members) > 1:
            names = sorted({k for m in members for k in m if "." in k})
            keys += [k for k in differing(members, names) if k not in keys]
    return keys


def describe(facts: dict, keys: Sequence[str]) -> str:
    """``micro batch 4, precision bf16``: the differing facts as words, for labels and flags."""
    return ", ".join(f"{FACT_LABEL.get(k, k)} {fact_text(facts.get(k))}" for k in keys)
