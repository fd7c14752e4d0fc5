"""One registry style for every plugin point: frameworks, accelerator kinds, node runtimes, host backends.

A plugin registers under a name (``@FRAMEWORKS.register("torch")`` on a class, or ``register(name, item)``
for data such as a kind a vendor declares in YAML); ``get`` answers an unknown name with a
``UserError`` that lists the known ones and the closest match.
"""
from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterator, TypeVar

from run_benchmarks.errors import UserError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, what: str, instantiate: bool = False):
        self.what = what  # "framework", "accelerator kind": how errors name an entry
        self.instantiate = instantiate  # a registered class is stored as one instance of it
        self._items: dict[str, T] = {}

    def register(self, name: str, item=None, *, where: str = "") -> Callable | T:
        """``register(name, item)``, or ``@register(name)`` on a class. A name is taken once."""
        def add(value):
            if name in self._items:
                raise UserError(f"{where + ': ' if where else ''}{self.what} {name!r} is declared twice",
                                f"rename one: {self.what} names are unique")
            self._items[name] = value() if self.instantiate and isinstance(value, type) else value
            return value
        return add if item is None else add(item)

    def get(self, name: str, fix: str = "") -> T:
        if name in self._items:
            return self._items[name]
        close = difflib.get_close_matches(name, list(self._items), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(f"unknown {self.what} {name!r}",
                        f"{hint}known {self.what}s: {', '.join(sorted(self._items)) or '(none)'}"
                        + (f"; {fix}" if fix else ""))

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._items.items())

    def copy(self) -> "Registry[T]":
        other: Registry[T] = Registry(self.what, self.instantiate)
        other._items = dict(self._items)
        return other
