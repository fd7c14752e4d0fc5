"""Case names: ``<case>:<framework>[_<version>]:<hardware>:<nnodes>:<nprocs>[:<repeat>]``.

Example: ``gpt3_6.7B:paddle_2.5.1:A100:1:8`` or ``gpt2_tiny:torch_2.13:cpu:1:2:3``.
Only the syntax is checked here; whether the case, framework and hardware exist
is the registries' business.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from training.contract import batch

from run_benchmarks.errors import UserError

FORMAT = "<case>:<framework>[_<version>]:<hardware>:<nnodes>:<nprocs_per_node>[:<repeat>]"
EXAMPLE = "gpt2_tiny:torch_2.13:cpu:1:2"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_FRAMEWORK = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*)(?:_(?P<version>[0-9][A-Za-z0-9.+\-]*))?$")


@dataclass(frozen=True)
class CaseName:
    case: str
    framework: str
    framework_version: Optional[str]
    hardware: str
    nnodes: int
    nprocs_per_node: int
    repeat: int = 1

    @property
    def world_size(self) -> int:
        return batch.world_size(self.nnodes, self.nprocs_per_node)

    @property
    def framework_field(self) -> str:
        return self.framework if not self.framework_version else f"{self.framework}_{self.framework_version}"

    def __str__(self) -> str:
        text = f"{self.case}:{self.framework_field}:{self.hardware}:{self.nnodes}:{self.nprocs_per_node}"
        return text if self.repeat == 1 else f"{text}:{self.repeat}"

    @property
    def slug(self) -> str:
        """A folder name for this case in a run's log tree."""
        return f"{self.case}-{self.framework_field}-{self.hardware}-{self.nnodes}x{self.nprocs_per_node}"


# Far above any real layout, far below what exhausts this machine while planning or starting.
MAXIMA = {
    "nnodes": (4096, "more nodes than any cluster accelbench plans for"),
    "nprocs_per_node": (1024, "one launcher starts that many worker processes on one host"),
    "repeat": (1000, "each round is a full run with its own port and log folder"),
}


MAX_FIELD = 100  # case, framework and hardware become one folder name (CaseName.slug), kept under NAME_MAX


def _shown(name: str) -> str:
    """The name as messages quote it: whole when short, its start when it is not (a 5,000-digit count)."""
    return repr(name) if len(name) <= 80 else repr(name[:77]) + "..."


def _positive(text: str, what: str, name: str) -> int:
    limit, why = MAXIMA[what]
    text = text.strip()
    if not re.fullmatch(r"-?[0-9]+", text):
        raise UserError(f"case name {_shown(name)}: {what} must be a whole number, got {text!r}",
                        f"write it like {EXAMPLE!r} ({FORMAT})")
    digits = text.lstrip("-").lstrip("0") or "0"
    value = int(digits) if len(digits) <= 12 else limit + 1  # int() of a huge string is slow, and pointless
    value = -value if text.startswith("-") else value
    if value < 1:
        raise UserError(f"case name {_shown(name)}: {what} must be at least 1, got {value}",
                        f"write it like {EXAMPLE!r} ({FORMAT})")
    if value > limit:
        raise UserError(f"case name {_shown(name)}: {what} must be at most {limit}, got {text[:30]}",
                        f"lower {what} to {limit} or less ({why})")
    return value


def parse(name: str) -> CaseName:
    fields = name.strip().split(":")
    if len(fields) not in (5, 6):
        raise UserError(f"case name {_shown(name)} has {len(fields)} field(s); it needs 5 or 6",
                        f"write it as {FORMAT}, e.g. {EXAMPLE!r}")
    case, framework, hardware = fields[0], fields[1], fields[2]
    for what, value in (("case", case), ("framework", framework), ("hardware", hardware)):
        if len(value) > MAX_FIELD:
            raise UserError(f"case name {_shown(name)}: {what} is {len(value)} characters long, over {MAX_FIELD}",
                            "shorten it (it becomes part of a folder name)")
    for what, value in (("case", case), ("hardware", hardware)):
        if not _NAME.match(value):
            raise UserError(f"case name {_shown(name)}: {what} {value!r} is empty or has characters other than "
                            "letters, digits, '_', '.', '-'", f"write it as {FORMAT}")
    match = _FRAMEWORK.match(framework)
    if not match:
        raise UserError(f"case name {_shown(name)}: framework {framework!r} is not <name> or <name>_<version>",
                        "e.g. 'torch', 'torch_2.13' or 'paddle_2.5.1'")
    nnodes = _positive(fields[3], "nnodes", name)
    nprocs = _positive(fields[4], "nprocs_per_node", name)
    repeat = _positive(fields[5], "repeat", name) if len(fields) == 6 else 1
    return CaseName(case, match["name"], match["version"], hardware, nnodes, nprocs, repeat)


def version_matches(requested: str, installed: str) -> bool:
    """``2.13`` matches ``2.13.0+cpu``: each requested release component must agree."""
    release = re.split(r"[+\-]", installed, maxsplit=1)[0]
    wanted, have = requested.split("."), release.split(".")
    if len(wanted) > len(have):
        have += ["0"] * (len(wanted) - len(have))
    return all(w == h or (w.isdigit() and h.isdigit() and int(w) == int(h)) for w, h in zip(wanted, have))
