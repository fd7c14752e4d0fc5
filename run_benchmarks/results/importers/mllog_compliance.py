"""MLPerf's own verdicts on a result log: its compliance rules, and its result summarizer's score of a folder.

Both are mlperf-logging's (the ``mlperf`` extra). A log does not say which round's rules it follows, so each
ruleset of the package whose benchmark list holds the log's ``submission_benchmark`` is tried, newest first,
and the result names the first that passes (or, where none does, the newest one's complaints). The rules are
the package's code run over the log's values; two things keep an untrusted log from steering them: the rules
load a further rules file named after a log value (``closed_{benchmark}.yaml``, ``{division}_common.yaml``), so
every such value must be a plain name of that ruleset (else the log is not checked, saying why), and the
checker's queue of files, a module global, is emptied before and after each run. Their messages go nowhere
but into the result (the package logs them; that is switched off while it runs).
"""
from __future__ import annotations

import contextlib
import functools
import io
import logging
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import yaml

from run_benchmarks.results.importers import clip

USAGE = "training"
SAFE = re.compile(r"^[A-Za-z0-9_]{1,64}$")
SHOWN = 3  # complaints kept of a failed check


@dataclass
class Verdict:
    """Which ruleset a log was checked against and what came of it (``checked`` False: why not, in ``text``)."""

    checked: bool
    passed: bool = False
    ruleset: Optional[str] = None
    messages: list[str] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        if not self.checked:
            return f"not checked: {self.messages[0]}"
        if self.passed:
            return (f"passes mlperf-logging's training {self.ruleset} rules"
                    + (f" (newer rulesets tried first: {', '.join(self.tried[:-1])})" if len(self.tried) > 1 else ""))
        return (f"fails mlperf-logging's rules of every round that has this benchmark ({', '.join(self.tried)}); "
                f"the closest, training {self.ruleset}: " + " | ".join(self.messages))


def _version() -> str:
    from importlib.metadata import version

    return version("mlperf-logging")


@functools.lru_cache(maxsize=None)
def rulesets(benchmark: str) -> tuple[str, ...]:
    """The package's training rulesets that list ``benchmark``, newest first."""
    from mlperf_logging import benchmark_meta
    from mlperf_logging.compliance_checker import mlp_compliance

    found = []
    for path in Path(mlp_compliance.__file__).parent.glob(f"{USAGE}_*"):
        version = path.name.removeprefix(f"{USAGE}_")
        if not re.fullmatch(r"\d+\.\d+\.\d+", version) or not (path / "common.yaml").is_file():
            continue
        try:
            if benchmark in benchmark_meta.get_allowed_benchmarks(USAGE, version):
                found.append(version)
        except ValueError:
            continue
    return tuple(sorted(found, key=lambda v: tuple(map(int, v.split("."))), reverse=True))


@functools.lru_cache(maxsize=None)
def _steering_keys(ruleset: str) -> frozenset[str]:
    """The keys whose values a ruleset's code turns into the name of a further rules file to load."""
    from mlperf_logging.compliance_checker import mlp_compliance

    keys = set()
    for path in Path(mlp_compliance.__file__).parent.glob(f"{USAGE}_{ruleset}/*.yaml"):
        records = yaml.load(path.read_text(), Loader=yaml.BaseLoader) or []
        for record in records:
            body = record.get("KEY") if isinstance(record, dict) else None
            if isinstance(body, dict) and "enqueue_config" in str(body):
                keys.add(body.get("NAME"))
    return frozenset(k for k in keys if isinstance(k, str))


@functools.lru_cache(maxsize=None)
def _required(ruleset: str) -> tuple[tuple[str, str], ...]:
    """(key, requirement) of each key the ruleset's common rules require at least once."""
    from mlperf_logging.compliance_checker import mlp_compliance

    path = Path(mlp_compliance.__file__).parent / f"{USAGE}_{ruleset}" / "common.yaml"
    records = yaml.load(path.read_text(), Loader=yaml.BaseLoader) or []
    keys = [(r["KEY"].get("NAME"), r["KEY"].get("REQ")) for r in records if isinstance(r, dict)
            and isinstance(r.get("KEY"), dict)]
    return tuple((k, req) for k, req in keys if req in ("EXACTLY_ONE", "AT_LEAST_ONE") and isinstance(k, str))


def _missing(loglines: list, ruleset: str) -> list[str]:
    """The package's own complaint for each required key the log lacks: a log missing one fails the ruleset
    whatever else it holds, so the checker (seconds over every ruleset) is not run for it."""
    present = {line.key for line in loglines}
    return [f"Required {req} occurrence of '{key}' but found 0" for key, req in _required(ruleset)
            if key not in present]


def _unsafe(loglines: list, ruleset: str) -> str:
    steering = _steering_keys(ruleset)
    for line in loglines:
        if line.key in steering and not SAFE.fullmatch(str(line.value.get("value"))):
            return (f"line {line.lineno}: {line.key} {clip(repr(line.value.get('value')), 60)} is no plain name, and "
                    "the rules would load a file named after it")
    return ""


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The package prints and logs what it finds; here it goes into the result instead."""
    from mlperf_logging.compliance_checker import mlp_compliance

    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    mlp_compliance.enqueued_configs.clear()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        mlp_compliance.enqueued_configs.clear()
        logging.disable(before)


def check(loglines: Optional[list], benchmark: Optional[str], unchecked: str = "") -> Verdict:
    """The log against each ruleset that has its benchmark, newest first, until one passes."""
    if loglines is None:
        return Verdict(False, messages=[unchecked])
    if not isinstance(benchmark, str) or not rulesets(benchmark):
        return Verdict(False, messages=[f"mlperf-logging {_version()} has no rules for submission_benchmark "
                                        f"{clip(repr(benchmark), 60)}"])
    verdict, fewest = Verdict(True), 0
    for ruleset in rulesets(benchmark):
        why = _unsafe(loglines, ruleset)
        if why:
            return Verdict(False, messages=[why])
        verdict.tried.append(ruleset)
        messages = _missing(loglines, ruleset) or _run(loglines, ruleset)
        if not messages:
            verdict.passed, verdict.ruleset, verdict.messages = True, ruleset, []
            return verdict
        if verdict.ruleset is None or len(messages) < fewest:  # the closest ruleset's complaints say most
            fewest, verdict.ruleset = len(messages), ruleset
            verdict.messages = [_compact(m) for m in messages[:SHOWN]]
    return verdict


def _compact(message: str) -> str:
    """A complaint on one line: what failed and the test, without the log line and the checker's state dumps."""
    kept = [line.strip() for line in message.splitlines() if line.strip() and not line.lstrip().startswith(
        (":::MLLOG", "current context", "current line", '"', "}", "{"))]
    return clip(" ".join(kept), 160)


def _run(loglines: list, ruleset: str) -> list[str]:
    """The ruleset's checker over the log: its complaints (none: the log passes)."""
    from mlperf_logging.compliance_checker import mlp_compliance

    checker = mlp_compliance.make_checker(USAGE, ruleset, quiet=True, werror=False)
    try:
        with _quiet():
            checker.check_loglines(list(loglines), f"{USAGE}_{ruleset}/common.yaml")
    except Exception as exc:  # noqa: BLE001 - the rules' own code run over an untrusted log's values
        return [f"the rules could not run over this log ({type(exc).__name__}: {clip(str(exc), 80)})"]
    return [*checker.overwritable.values(), *checker.not_overwritable]


@dataclass
class Score:
    """The result summarizer's score of a folder: the olympic mean of the time to train of its converged runs."""

    minutes: Optional[float]
    ruleset: Optional[str]
    counted: dict[str, float]  # file name -> its time to train (min), for the runs the summarizer counted
    required: Optional[int]
    note: str = ""


def score_folder(runs: list[tuple[str, list]], benchmark: Optional[str]) -> Score:
    """``runs``: (file name, the package's lines of it, as read behind accelbench's bounds). They are written to a
    private folder as ``result_<i>.txt`` (the only files the summarizer globs), so it reads nothing else."""
    from mlperf_logging import benchmark_meta
    from mlperf_logging.result_summarizer import result_summarizer

    if not isinstance(benchmark, str) or not rulesets(benchmark):
        return Score(None, None, {}, None, f"mlperf-logging {_version()} has no rules for "
                                           f"submission_benchmark {clip(repr(benchmark), 60)}")
    required = benchmark_meta.get_result_file_counts(USAGE).get(benchmark)
    with tempfile.TemporaryDirectory(prefix="accelbench-mlperf-") as folder:
        names = {}
        for i, (name, loglines) in enumerate(runs):
            if loglines is None:
                continue
            target = Path(folder) / f"result_{i}.txt"
            target.write_text("".join(line.full_string + "\n" for line in loglines), encoding="latin-1",
                              errors="replace")
            names[str(target)] = name
        for ruleset in rulesets(benchmark):
            if any(_unsafe(lines, ruleset) for _, lines in runs if lines is not None):
                return Score(None, None, {}, required, "a log names a rules file no plain name gives; not scored")
            try:
                with _quiet():
                    track, _, score, _, _ = result_summarizer._compute_strong_score_standalone(
                        benchmark, None, False, folder, USAGE, ruleset, return_full_scores=True)
            except Exception as exc:  # noqa: BLE001 - the package's code over untrusted logs
                return Score(None, ruleset, {}, required, f"the result summarizer could not run ({type(exc).__name__}:"
                                                          f" {clip(str(exc), 80)})")
            if score is not None:
                return Score(score, ruleset, {names[k]: v for k, v in track.items()}, required)
    return Score(None, None, {}, required, "no ruleset scores these runs: too few of them converged and pass the "
                                          "rules (the summarizer drops at most one, four for unet3d)")
