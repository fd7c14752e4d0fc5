"""One registry style for every plug point of both halves (ReFrame's ``core/backends.py`` shape): a plug point
is a ``Registry``; ``register`` adds an entry under a name, ``get`` looks one up, and neither imports a plugin
before it is asked for.

An entry is an object (``register(name, item)``, or ``@register(name)`` on a class or function), or
``"package.module:attribute"``, imported on its first ``get`` (a monitor's sampler, a framework's operations:
their libraries load only on the node that uses them). ``modules`` are imported before the first lookup,
for plugins that register themselves when imported (the log parsers). An unknown name is refused with
the known ones and the closest match, raised as ``refusal`` makes it: ``UnknownName`` here on the workers,
a ``UserError`` in the orchestrator (``run_benchmarks/registry.py``). Standard library only.
"""
from __future__ import annotations

import difflib
import importlib
from typing import Callable, Generic, Iterator, Sequence, TypeVar

T = TypeVar("T")


class UnknownName(LookupError):
    """A name no entry has: ``problem`` and ``fix`` (the known names, the closest one)."""

    def __init__(self, problem: str, fix: str = ""):
        super().__init__(f"{problem}; {fix}" if fix else problem)
        self.problem, self.fix = problem, fix


class Registry(Generic[T]):
    def __init__(self, what: str, instantiate: bool = False, modules: Sequence[str] = ()):
        self.what = what  # "framework", "accelerator kind": how errors name an entry
        self.instantiate = instantiate  # a registered class is stored as one instance of it
        self.modules = tuple(modules)  # imported before the first lookup; each registers its entries
        self._items: dict[str, object] = {}

    def refusal(self, problem: str, fix: str) -> Exception:
        return UnknownName(problem, fix)

    def register(self, name: str, item=None, *, where: str = "") -> Callable | T:
        """``register(name, item)``, or ``@register(name)`` on a class or function. A name is taken once."""
        def add(value):
            if name in self._items:
                raise self.refusal(f"{where + ': ' if where else ''}{self.what} {name!r} is declared twice",
                                   f"rename one: {self.what} names are unique")
            self._items[name] = value() if self.instantiate and isinstance(value, type) else value
            return value
        return add if item is None else add(item)

    def unregister(self, name: str) -> None:
        self._items.pop(name, None)

    def _load(self) -> None:
        while self.modules:  # emptied first: a module that looks up this registry while importing finds it
            module, self.modules = self.modules[0], self.modules[1:]
            importlib.import_module(module)

    def get(self, name: str, fix: str = "") -> T:
        self._load()
        if name not in self._items:
            close = difflib.get_close_matches(name, list(self._items), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise self.refusal(f"unknown {self.what} {name!r}",
                               f"{hint}known {self.what}s: {', '.join(sorted(self._items)) or '(none)'}"
                               + (f"; {fix}" if fix else ""))
        item = self._items[name]
        if isinstance(item, str) and ":" in item:  # "package.module:attribute": imported now, kept
            module, attribute = item.split(":")
            item = getattr(importlib.import_module(module), attribute)
            self._items[name] = item() if self.instantiate and isinstance(item, type) else item
        return self._items[name]

    def __contains__(self, name: str) -> bool:
        self._load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(sorted(self._items))

    def items(self) -> list[tuple[str, T]]:
        return [(name, self.get(name)) for name in self]

    def copy(self) -> "Registry[T]":
        self._load()
        other = type(self)(self.what, self.instantiate)
        other._items = dict(self._items)
        return other
