"""The published figures of a reference table, as data: ``published/<table>.yaml``, one file per table, each
figure with the source it comes from and the conditions it was measured under.

Why a data file: the figures are the source's, not accelbench's. Keeping them apart from the code that places
our runs beside them lets a reader check every number against the source, and a newer version of the source
replace them without touching a line of Python. Nothing here measures or converts: a table's plug-in says what
each figure means in our units (``ReferenceTable.published_value``)."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Optional, Union

from pydantic import Field, model_validator

from run_benchmarks.catalog.config import Strict, load_model

HERE = Path(__file__).resolve().parent / "published"
Scalar = Union[str, int, float, bool]


class Source(Strict):
    """Where a table's figures come from: enough for a reader to find each number again."""

    name: str = Field(description="what the source is: the repository, guide or page")
    where: str = Field(description="the file, section and table the figures are read from")
    hardware: Optional[str] = Field(None, description="the vendors/ accelerator the figures were measured on")
    conditions: str = Field("", description="what holds for every figure of this source")
    formula: str = Field("", description="how the source computes a derived figure (TFLOP/s, MFU), where it does")


class PublishedFigure(Strict):
    """One figure as the source prints it. ``values`` are in the source's units and formula; None where the
    source prints no number (``Crashes``, ``OOM``, ``N/A``)."""

    printed: str
    values: dict[str, Optional[float]] = Field(default_factory=dict)
    setup: str = Field("", description="the source's words for the setup this figure was measured with")
    expect: dict[str, Scalar] = Field(default_factory=dict, description=(
        "layout facts a run of ours must have to be compared with this figure (report/facts.py names)"))
    conditions: str = ""


class PublishedCell(Strict):
    """A cell of the source's table: its row and column words, and its figures per measure (a table plug-in's
    measure name); a measure may list several figures, one per setup the source measured."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    source: str
    labels: dict[str, Scalar]
    figures: dict[str, list[PublishedFigure]] = Field(default_factory=dict)
    conditions: str = ""


class PublishedTable(Strict):
    title: str
    sources: dict[str, Source] = Field(min_length=1)
    notes: list[str] = Field(default_factory=list)
    axes: dict[str, list[Scalar]] = Field(default_factory=dict, description=(
        "a grid the source runs without publishing figures (ppo): its axes, in the source's order"))
    models: dict[str, dict[str, Scalar]] = Field(default_factory=dict, description=(
        "the source's model shapes (ModelSpec keys), where a table converts the source's formula into ours"))
    cells: list[PublishedCell] = Field(default_factory=list)

    @model_validator(mode="after")
    def _sources_known_ids_unique(self) -> "PublishedTable":
        seen: set[str] = set()
        for cell in self.cells:
            if cell.source not in self.sources:
                raise ValueError(f"cell {cell.id!r}: source {cell.source!r} is not one of {sorted(self.sources)}")
            if cell.id in seen:
                raise ValueError(f"cell id {cell.id!r} is given twice")
            seen.add(cell.id)
        return self


@functools.lru_cache(maxsize=None)
def load(name: str, folder: Path = HERE) -> PublishedTable:
    """``published/<name>.yaml``, validated (a bad file names itself, the key and the fix)."""
    return load_model(PublishedTable, folder / f"{name}.yaml")
