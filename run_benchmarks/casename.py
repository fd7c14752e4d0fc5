"""Case names: ``<case>:<framework>[_<version>]:<hardware>:<nnodes>:<nprocs>[:<repeat>]``.

Example: ``gpt3_6.7B:paddle_2.5.1:A100:1:8`` or ``gpt2_tiny:torch_2.13:cpu:1:2:3``.
Only the syntax is checked here; whether the case, framework and hardware exist
is the registries' business.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .errors import UserError

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
        return self.nnodes * self.nprocs_per_node

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


def _positive(text: str, what: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"case name {name!r}: {what} must be a whole number, got {text!r}",
                        f"write it like {EXAMPLE!r} ({FORMAT})") from None
    if value < 1:
        raise UserError(f"case name {name!r}: {what} must be at least 1, got {value}",
                        f"write it like {EXAMPLE!r} ({FORMAT})")
    return value


def parse(name: str) -> CaseName:
    fields = name.strip().split(":")
    if len(fields) not in (5, 6):
        raise UserError(f"case name {name!r} has {len(fields)} field(s); it needs 5 or 6",
                        f"write it as {FORMAT}, e.g. {EXAMPLE!r}")
    case, framework, hardware = fields[0], fields[1], fields[2]
    for what, value in (("case", case), ("hardware", hardware)):
        if not _NAME.match(value):
            raise UserError(f"case name {name!r}: {what} {value!r} is empty or has characters other than "
                            "letters, digits, '_', '.', '-'", f"write it as {FORMAT}")
    match = _FRAMEWORK.match(framework)
    if not match:
        raise UserError(f"case name {name!r}: framework {framework!r} is not <name> or <name>_<version>",
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
