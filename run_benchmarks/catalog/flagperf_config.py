"""FlagPerf's Python extern config files, read without running them.

FlagPerf writes a vendor's tuning as a Python module of plain assignments (``per_device_train_batch_size = 4``,
``decay_steps = 130 * 1024 * 1024``) and imports it. Importing a file someone sent runs whatever it holds, so
accelbench never does: the file is parsed with ``ast`` and only ``NAME = <literal>`` (or ``NAME: <type> =
<literal>``) is accepted, where a literal is a number, string, bool, None, a list/tuple/dict of literals, or
arithmetic (+ - * / // % **, unary minus) on numbers. Anything else — a call, an import, a name or attribute on
the right, a subscript, a dunder name, an f-string, a loop, ``+=`` — is refused with the file, the line and
why, before anything starts. The file's size is bounded by the config cap (limits.CONFIG_BYTES), and the
values' nesting and the size of the numbers arithmetic makes are bounded too, so no file can make the reader
work without end. What the keys mean is ``flagperf_keys``'s business.

FlagPerf's run.py settings (``test_conf.py``) also write ``FLAGPERF_LOG_PATH = FLAGPERF_PATH + "/result/"``:
read with ``names=True``, a name of a key assigned above in the same file (a string or number) and ``+`` of two
strings are accepted too, the string bounded by ``MAX_STRING``; still nothing is run.
"""
from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from run_benchmarks import limits
from run_benchmarks.catalog.config import read_config_text
from run_benchmarks.errors import UserError

MAX_DEPTH = 32  # as for YAML (config.MAX_YAML_DEPTH): configs nest a level or two
MAX_INT_BITS = 256  # far above any batch, step or degree; bounds what ** and * can build
MAX_STRING = 4096  # a joined string (a path, docker options): far longer than any, and no doubling without end
ANNOTATIONS = {"int", "float", "str", "bool", "list", "tuple", "dict"}  # FlagPerf writes `seed: int = 42`
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
               ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
FIX = ("write the value out as a literal (a number, string, True/False/None, or a list of them); "
       "accelbench reads FlagPerf configs without running them")


@dataclass(frozen=True)
class Assigned:
    value: Any
    line: int


class _Refused(Exception):
    def __init__(self, node: ast.AST, why: str):
        super().__init__(why)
        self.line, self.column, self.why = getattr(node, "lineno", 0), getattr(node, "col_offset", -1) + 1, why


def read_text(path: Path) -> str:
    """The file's text, its size checked against the config cap before a byte is parsed."""
    return read_config_text(path)


def parse_assignments(text: str, source: str, names: bool = False) -> dict[str, Assigned]:
    """Each ``NAME = literal`` of ``text`` as its value and line; anything else refused, naming ``source``.
    ``names``: an earlier key's name and ``+`` of strings are values too (run.py's settings files)."""
    limits.CONFIG_BYTES.check(len(text.encode("utf-8", "surrogatepass")), source)
    try:
        tree = ast.parse(text, filename=source)
    except SyntaxError as exc:
        raise UserError(f"{source}:{exc.lineno or 0}: Python syntax error: {exc.msg}",
                        "check that line; a FlagPerf config is assignments, one per line") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # a NUL byte; nesting the parser cannot take
        # Python's parser gives up on deep nesting (300,000 unary minus signs, a 100,000-deep power tower)
        # with a MemoryError or RecursionError that carries no message: the reason is then said here.
        why = str(exc).strip() or (f"nested deeper than Python's parser takes ({type(exc).__name__})"
                                   if isinstance(exc, (RecursionError, MemoryError)) else type(exc).__name__)
        raise UserError(f"{source}: not a FlagPerf config: {why}", FIX) from None
    found: dict[str, Assigned] = {}
    try:
        for statement in tree.body:
            name, value = _assignment(statement, {k: a.value for k, a in found.items()} if names else None)
            if name is None:
                continue
            if name in found:
                raise _Refused(statement, f"{name!r} is assigned twice (first on line {found[name].line}); "
                                          "keep one of them")
            found[name] = Assigned(value, statement.lineno)
    except _Refused as exc:
        raise UserError(f"{source}:{exc.line}: refused: {exc.why}", FIX) from None
    return found


def read(path: Path, names: bool = False) -> dict[str, Assigned]:
    return parse_assignments(read_text(path), str(path), names)


def _assignment(node: ast.stmt, env: dict | None) -> tuple[str | None, Any]:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return None, None  # a docstring or a bare string: a comment
    if isinstance(node, ast.Assign):
        if len(node.targets) != 1:
            raise _Refused(node, "a chained assignment (a = b = ...); write one assignment per name")
        target = node.targets[0]
    elif isinstance(node, ast.AnnAssign):
        annotation = node.annotation
        if not (isinstance(annotation, ast.Name) and annotation.id in ANNOTATIONS):
            raise _Refused(node, f"the annotation {_shown(annotation)} is not one of {', '.join(sorted(ANNOTATIONS))}")
        if node.value is None:
            raise _Refused(node, "an annotation without a value")
        target = node.target
    else:
        raise _Refused(node, _statement_why(node))
    if not isinstance(target, ast.Name):
        raise _Refused(node, f"the target {_shown(target)} is not a plain name (no attributes, subscripts or "
                             "unpacking)")
    if target.id.startswith("__") and target.id.endswith("__"):
        raise _Refused(node, f"{target.id!r} is a dunder name, which Python gives meaning to")
    return target.id, _literal(node.value, 0, env)


def _statement_why(node: ast.stmt) -> str:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "an import (a config file is read, never run, so it can import nothing)"
    if isinstance(node, ast.AugAssign):
        return "an augmented assignment (+=, ...); write the resulting value"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return f"a call of {_shown(node.value.func)}"
    return f"a {type(node).__name__} statement; only NAME = <literal> is accepted"


def _literal(node: ast.expr, depth: int, env: dict | None = None) -> Any:
    if depth > MAX_DEPTH:
        raise _Refused(node, f"a value nested more than {MAX_DEPTH} levels deep")
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, (bool, int, float, str)):
            if isinstance(value, int) and not isinstance(value, bool):
                _bounded(node, value)
            if isinstance(value, float) and not math.isfinite(value):
                raise _Refused(node, f"{value!r} is not a finite number")
            return value
        raise _Refused(node, f"a {type(value).__name__} constant; numbers, strings, booleans and None only")
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(item, depth + 1, env) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise _Refused(node, "** unpacking in a dict")
        keys = [_literal(key, depth + 1, env) for key in node.keys]
        if not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in keys):
            raise _Refused(node, "a dict key that is not a string or a whole number")
        return dict(zip(keys, (_literal(v, depth + 1, env) for v in node.values)))
    if env is not None and isinstance(node, ast.Name):
        if node.id not in env:
            raise _Refused(node, f"the name {node.id!r} is not a key assigned above in this file (a value is "
                                 "written out, or names such a key)")
        if not isinstance(env[node.id], (str, int, float)):
            raise _Refused(node, f"the name {node.id!r} holds a {type(env[node.id]).__name__}; only a key holding "
                                 "a string or number may be named")
        return env[node.id]
    if env is not None and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, depth + 1, env), _literal(node.right, depth + 1, env)
        if isinstance(left, str) and isinstance(right, str):
            if len(left) + len(right) > MAX_STRING:
                raise _Refused(node, f"a joined string longer than {MAX_STRING} characters")
            return left + right
        return _arithmetic(node, _numeric(node.left, left, env), _numeric(node.right, right, env))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _number(node.operand, depth, env)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _number(node.left, depth, env), _number(node.right, depth, env)
        return _arithmetic(node, left, right)
    raise _Refused(node, _value_why(node))


def _number(node: ast.expr, depth: int, env: dict | None = None) -> int | float:
    return _numeric(node, _literal(node, depth + 1, env), env)


def _numeric(node: ast.expr, value: Any, env: dict | None) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Refused(node, f"arithmetic on {_shown(node)}; only numbers take + - * / // % **"
                             + ("" if env is None else " (and + joins two strings)"))
    return value


def _arithmetic(node: ast.BinOp, left, right):
    if isinstance(node.op, ast.Pow) and isinstance(left, int) and isinstance(right, int) and right > 0 \
            and max(left.bit_length(), 1) * right > MAX_INT_BITS * 4:
        raise _Refused(node, f"{left} ** {right} is far larger than any setting (over {MAX_INT_BITS} bits)")
    try:
        value = _ARITHMETIC[type(node.op)](left, right)
    except ZeroDivisionError:
        raise _Refused(node, "a division by zero") from None
    except OverflowError:
        raise _Refused(node, "a number too large for a float") from None
    if isinstance(value, complex) or (isinstance(value, float) and not math.isfinite(value)):
        raise _Refused(node, f"{_shown(node)} is not a finite real number")
    if isinstance(value, int):
        _bounded(node, value)
    return value


def _bounded(node: ast.AST, value: int) -> None:
    if value.bit_length() > MAX_INT_BITS:
        raise _Refused(node, f"a whole number of {value.bit_length()} bits, far larger than any setting "
                             f"(at most {MAX_INT_BITS} bits)")


def _value_why(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        return f"a call of {_shown(node.func)} (a config file is read, never run)"
    if isinstance(node, ast.Name):
        return f"the name {node.id!r} on the right side (a value must be written out, not looked up)"
    if isinstance(node, ast.Attribute):
        return f"the attribute {_shown(node)} (a value must be written out, not looked up)"
    if isinstance(node, ast.Subscript):
        return f"the subscript {_shown(node)} (a value must be written out, not looked up)"
    if isinstance(node, ast.JoinedStr):
        return "an f-string (it runs the code inside its braces); write the plain string"
    if isinstance(node, ast.BinOp):
        return f"the operator {type(node.op).__name__}; only + - * / // % ** on numbers"
    return f"a {type(node).__name__} expression; only literals and arithmetic on numbers"


def _shown(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - only for the message
        text = type(node).__name__
    return repr(text if len(text) <= 60 else text[:57] + "...")
