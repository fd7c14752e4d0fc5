"""One registry style for every plug point of both halves (ReFrame's ``core/backends.py`` shape): a plug point
is a ``Registry``; ``register`` adds an entry under a name, ``get`` looks one up, and neither imports a plugin
before it is asked for.

Built-in entries register one way: ``register(name, "package.module:attribute")``, imported on its first
``get`` (as torchx's built-in schedulers: a sampler's or a framework's library loads only where it is used),
so the import checks (tests/test_house.py) see each path as an import of its module. An object registered
as it is (``register(name, item)``) is the way in for what only exists at run time: a vendor's kinds read from
its vendor.yaml, a test's stand-in. ``make`` turns each entry into what ``get`` returns, once (a class into its
instance, a shipped kind's data into its schema): an object when registered, a path when imported.

An entry may be present but unusable here (ReFrame's backends registered with their error): registered as
``Unusable(why, fix)``, or a path whose import fails for want of a library outside this house. It is listed like any
other; ``get`` refuses it with why and the fix. An unknown name is refused with the known ones and the
closest match. Refusals are raised as ``refusal`` makes them: ``UnknownName`` here on the workers, a
``UserError`` in the orchestrator (``run_benchmarks/registry.py``). Standard library only.
"""
from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Callable, Generic, Iterator, Optional, TypeVar

T = TypeVar("T")


class UnknownName(LookupError):
    """A name no entry has, or one whose entry cannot be used here: ``problem`` and ``fix``."""

    def __init__(self, problem: str, fix: str = ""):
        super().__init__(f"{problem}; {fix}" if fix else problem)
        self.problem, self.fix = problem, fix


@dataclass(frozen=True)
class Unusable:
    """An entry that is present but cannot be used here, and why (ReFrame's backend registered with an error)."""

    why: str
    fix: str = ""


def instance_of(value):
    """``make`` for registries of classes: each registered class becomes one instance of it."""
    return value() if isinstance(value, type) else value


def is_path(item) -> bool:
    return isinstance(item, str) and ":" in item


class Registry(Generic[T]):
    def __init__(self, what: str, make: Optional[Callable[[object], T]] = None):
        self.what = what  # "framework", "accelerator kind": how errors name an entry
        self.make = make  # what a registered entry becomes on its first get (None: itself)
        self._items: dict[str, object] = {}
        self._paths: dict[str, str] = {}  # the entries registered as "module:attribute", by name

    def refusal(self, problem: str, fix: str) -> Exception:
        return UnknownName(problem, fix)

    def register(self, name: str, item=None, *, where: str = "") -> Callable | T:
        """``register(name, "module:attribute")`` (built-ins), ``register(name, item)``, or ``@register(name)``
        on a class or function (an out-of-tree plugin). A name is taken once."""
        def add(value):
            if name in self._items:
                raise self.refusal(f"{where + ': ' if where else ''}{self.what} {name!r} is declared twice",
                                   f"rename one: {self.what} names are unique")
            if is_path(value):
                self._items[name] = self._paths[name] = value
            else:
                self._items[name] = self.make(value) if self.make else value
            return value
        return add if item is None else add(item)

    def unregister(self, name: str) -> None:
        self._items.pop(name, None)
        self._paths.pop(name, None)

    def paths(self) -> dict[str, str]:
        """The entries registered by path (every built-in one), by name: what the import checks read."""
        return dict(self._paths)

    def _resolve(self, name: str) -> object:
        item = self._items[name]
        if is_path(item):  # imported now, made once, kept
            module, attribute = item.split(":")
            try:
                item = getattr(importlib.import_module(module), attribute)
            except ModuleNotFoundError as exc:
                if (exc.name or module).split(".")[0] == module.split(".")[0]:
                    raise  # a module of this house missing is a defect, not an optional library
                item = Unusable(f"it needs the Python module {exc.name}, which is not installed here",
                                "install it (setup.cfg lists the optional extras)")
            else:
                item = self.make(item) if self.make else item
            self._items[name] = item
        return item

    def unusable(self, name: str) -> Optional[Unusable]:
        """Why the entry cannot be used here (its module imported to find out), or None when it can."""
        item = self._resolve(name) if name in self._items else None
        return item if isinstance(item, Unusable) else None

    def get(self, name: str, fix: str = "") -> T:
        if name not in self._items:
            close = difflib.get_close_matches(name, list(self._items), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise self.refusal(f"unknown {self.what} {name!r}",
                               f"{hint}known {self.what}s: {', '.join(sorted(self._items)) or '(none)'}"
                               + (f"; {fix}" if fix else ""))
        item = self._resolve(name)
        if isinstance(item, Unusable):
            raise self.refusal(f"{self.what} {name!r} is present but unusable here: {item.why}",
                               item.fix or fix or f"choose another {self.what}")
        return item

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def items(self) -> list[tuple[str, T]]:
        return [(name, self.get(name)) for name in self]

    def copy(self) -> "Registry[T]":
        other = type(self)(self.what, self.make)
        other._items, other._paths = dict(self._items), dict(self._paths)
        return other
