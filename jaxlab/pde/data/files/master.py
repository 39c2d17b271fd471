"""DPOT's master table of data sets: name -> files, sizes, test horizon, channels, grid.

DPOT lists every pre-training set in ``DATASET_DICT`` (thu-ml/DPOT @ dcd2f9a, utils/make_master_file.py),
one dict per name with the fields of :data:`DPOT_FIELDS`; users add their own sets by adding
entries. jaxlab reads such a table from

* a Python file in DPOT's style (``DATASET_DICT[name] = {...}``, ``DATASET_DICT[name]['key'] = value``,
  with ``name = '...'`` assignments between them): the official make_master_file.py itself reads
  as is. The file is parsed, never executed (the official one writes a CSV with pandas when run);
  values must be literals or names assigned literals earlier in the file;
* a JSON or YAML file: ``{name: {field: value, ...}, ...}``.

Beyond DPOT's fields an entry may say ``format`` (which layout its files have, :data:`FORMATS`;
DPOT's own by default) and ``fields`` (which stored fields become channels, for PDEBench's CFD
files and The Well). Relative paths are relative to a root folder (``data.root``, else the
table's folder), where DPOT's were relative to its working directory.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
from typing import Any, Mapping, Sequence

from jaxlab.errors import InputError, check, is_int

#: DPOT's fields of a master-table entry (utils/make_master_file.py:12-22; 'pred_channels' :279).
DPOT_FIELDS = ("train_path", "test_path", "train_size", "test_size", "scatter_storage", "t_test", "t_in",
               "t_total", "in_size", "n_channels", "downsample", "pred_channels")
JAXLAB_FIELDS = ("format", "fields")
REQUIRED = ("train_path", "test_path", "train_size", "test_size", "t_test")
#: The layouts a master-table entry's ``format`` names: DPOT's own (one file, or scatter storage),
#: PDEBench's 2-D CFD and per-sample groups (diffusion-reaction, shallow water), The Well.
FORMATS = ("dpot", "pdebench_cfd", "pdebench_groups", "the_well")
TABLE_NAME = "DATASET_DICT"  # the official table's variable


@dataclasses.dataclass(frozen=True)
class MasterEntry:
  """One data set of a master table, checked; paths as written in the table (see ``resolve`` in this module).

  Attributes follow DPOT's field names; ``t_in`` is informative in DPOT ("not necessary used")
  and so here; ``t_total``, ``in_size`` and ``n_channels``, when given, are checked against the
  files; ``pred_channels`` (evaluated channels, the first ones) defaults to all.
  """

  name: str
  train_path: str
  test_path: str
  train_size: int
  test_size: int
  t_test: int
  scatter_storage: bool = False
  t_in: int | None = None
  t_total: int | None = None
  in_size: tuple[int, int] | None = None
  n_channels: int | None = None
  downsample: tuple[int, int] = (1, 1)
  pred_channels: int | None = None
  format: str = "dpot"
  fields: tuple[str, ...] = ()


# Methods that change a dict in place: a table built with them is not what the parser reads.
_MUTATORS = ("update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__")
_MODELLED = (f"master tables are parsed, never run: write each entry at the top level as {TABLE_NAME}[name] = {{...}} "
             f"and {TABLE_NAME}[name]['key'] = value (loops, conditions, .update(), +=, del are not read)")


def _read_text(path: str) -> str:
  """The file's text as UTF-8; other bytes are one line naming the file, the line and the byte."""
  try:
    with open(path, "rb") as f:
      raw = f.read()
  except OSError as e:
    raise InputError(f"master table {path} cannot be read ({e.strerror or e})") from None
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError as e:
    line = raw[:e.start].count(b"\n") + 1
    raise InputError(f"master table {path}: not UTF-8 text (byte {raw[e.start]:#04x} at line {line}, offset "
                     f"{e.start}); save it as UTF-8") from None


def _root_name(node: ast.AST) -> str | None:
  """``a`` of ``a``, ``a[k]``, ``a.b[k]``..."""
  while isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
    node = node.value
  return node.id if isinstance(node, ast.Name) else None


def _stored_roots(target: ast.AST) -> list[str | None]:
  if isinstance(target, (ast.Tuple, ast.List)):
    return [r for t in target.elts for r in _stored_roots(t)]
  return [_root_name(target)]


def _targets(node: ast.stmt) -> list[ast.AST]:
  if isinstance(node, (ast.Assign, ast.Delete)):
    return list(node.targets)
  if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
    return [node.target]
  if isinstance(node, (ast.With, ast.AsyncWith)):
    return [i.optional_vars for i in node.items if i.optional_vars is not None]
  return []


def _changes(node: ast.stmt, watched: set[str], functions: set[str], own_targets: bool = True) -> bool:
  """Whether ``node`` itself (not the statements nested in it) changes the table or a watched name."""
  if own_targets and any(r in watched for t in _targets(node) for r in _stored_roots(t)):
    return True
  for child in ast.iter_child_nodes(node):
    if not isinstance(child, ast.expr):
      continue
    for sub in ast.walk(child):
      if isinstance(sub, ast.NamedExpr) and _root_name(sub.target) in watched:
        return True
      if not isinstance(sub, ast.Call):
        continue
      func = sub.func
      if isinstance(func, ast.Attribute) and func.attr in _MUTATORS and _root_name(func.value) == TABLE_NAME:
        return True
      if isinstance(func, ast.Name) and func.id in functions:
        return True
  return False


def _first_change(stmt: ast.stmt, watched: set[str], functions: set[str], own_targets: bool = True) -> ast.stmt | None:
  """The first statement in ``stmt`` (itself or nested) that changes the table or a watched name, if any."""
  for node in ast.walk(stmt):
    if isinstance(node, ast.stmt) and _changes(node, watched, functions, own_targets or node is not stmt):
      return node
  return None


def _is_entry_target(target: ast.AST) -> bool:
  """A name, or ``DATASET_DICT[k]...[k]``: the two assignments the parser models."""
  if isinstance(target, ast.Name):
    return True
  while isinstance(target, ast.Subscript):
    target = target.value
  return isinstance(target, ast.Name) and target.id == TABLE_NAME


def _literal_python_table(path: str) -> dict[str, Any]:
  """``DATASET_DICT`` of a DPOT-style Python file, by reading its assignments (nothing is executed).

  A statement that would change the table (or a name its entries use) in a way this reader does not
  model, e.g. ``DATASET_DICT.update(...)``, ``+=``, ``del`` or an assignment inside ``for`` / ``if``, is
  refused in one line naming its line, rather than skipped.
  """
  text = _read_text(path)
  try:
    tree = ast.parse(text, filename=path)
  except SyntaxError as e:
    raise InputError(f"master table {path}: not valid Python (line {e.lineno}: {e.msg})") from None
  names: dict[str, Any] = {}
  functions: set[str] = set()  # the file's functions that change the table when called

  def value(node: ast.AST) -> Any:
    if isinstance(node, ast.Name):
      if node.id not in names:
        raise InputError(f"master table {path}:{node.lineno}: {node.id!r} is not a literal assigned earlier in the "
                         "file; master tables hold literals (strings, numbers, tuples, dicts)")
      return names[node.id]
    try:
      return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
      if isinstance(node, ast.Dict):
        return {value(k): value(v) for k, v in zip(node.keys, node.values)}
      raise InputError(f"master table {path}:{node.lineno}: {ast.unparse(node)!r} is not a literal; master tables "
                       "hold literals (strings, numbers, tuples, dicts) or names assigned them") from None

  table: dict[str, Any] | None = None
  for stmt in tree.body:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):  # not run unless called (checked at the call)
      if _first_change(stmt, {TABLE_NAME}, functions) is not None:
        functions.add(stmt.name)
      continue
    modelled = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _is_entry_target(stmt.targets[0])
    bad = _first_change(stmt, set(names) | {TABLE_NAME}, functions, own_targets=not modelled)
    if bad is not None:
      shown = ast.unparse(bad).splitlines()[0]
      raise InputError(f"master table {path}:{bad.lineno}: {shown[:100]!r} changes {TABLE_NAME} (or a name its "
                       f"entries use) in a way this reader does not model; {_MODELLED}")
    if not modelled:
      continue  # imports, other names, the official file's closing pandas call
    target = stmt.targets[0]
    if isinstance(target, ast.Name):
      if target.id == TABLE_NAME:
        table = value(stmt.value)
      else:
        try:
          names[target.id] = value(stmt.value)
        except InputError:
          names.pop(target.id, None)  # not a literal: an error only if an entry uses it
      continue
    chain = []
    while isinstance(target, ast.Subscript):
      chain.append(target.slice)
      target = target.value
    if not (isinstance(target, ast.Name) and target.id == TABLE_NAME):
      continue
    if table is None:
      raise InputError(f"master table {path}:{stmt.lineno}: {TABLE_NAME} is used before '{TABLE_NAME} = {{}}'")
    container = table
    keys = [value(k) for k in reversed(chain)]
    for key in keys[:-1]:
      if key not in container:
        raise InputError(f"master table {path}:{stmt.lineno}: {TABLE_NAME} has no entry {key!r} yet")
      container = container[key]
    container[keys[-1]] = value(stmt.value)
  if table is None:
    raise InputError(f"master table {path} assigns no {TABLE_NAME}; a Python master table is DPOT's "
                     f"make_master_file.py style ({TABLE_NAME}[name] = {{'train_path': ..., ...}})")
  return table


def load_table(path: str) -> dict[str, dict[str, Any]]:
  """The raw table ``{name: {field: value}}`` of a ``.py`` (DPOT's style), ``.json`` or ``.yaml`` file.

  Args:
    path: the master table's file.

  Returns:
    Every entry as written, in the file's order.

  Raises:
    InputError: the file is missing, not UTF-8, of another kind, or not a table of dicts; a Python table
      with a statement that changes it in a way the parser does not model.
  """
  check(not os.path.isdir(path), f"master table {path} is a directory; allowed: a table file (.py in DPOT's "
        "make_master_file.py style, .json, .yaml)")
  check(os.path.isfile(path), f"master table {path} does not exist")
  ext = os.path.splitext(path)[1].lower()
  if ext == ".py":
    table = _literal_python_table(path)
  elif ext == ".json":
    try:
      table = json.loads(_read_text(path))
    except json.JSONDecodeError as e:
      raise InputError(f"master table {path}: not valid JSON ({e})") from None
  elif ext in (".yaml", ".yml"):
    import yaml  # noqa: PLC0415 - only for YAML tables (PyYAML comes with flax)
    try:
      table = yaml.safe_load(_read_text(path))
    except yaml.YAMLError as e:
      raise InputError(f"master table {path}: not valid YAML ({str(e).splitlines()[0]})") from None
  else:
    raise InputError(f"master table {path}: extension {ext!r}; allowed: .py (DPOT's make_master_file.py style), "
                     ".json, .yaml, .yml")
  check(isinstance(table, Mapping) and len(table) >= 1 and all(isinstance(v, Mapping) for v in table.values()),
        f"master table {path} must map data-set names to dicts of fields ({', '.join(REQUIRED)}, ...)")
  return {str(k): dict(v) for k, v in table.items()}


def _pair(value: Any, where: str, minimum: int) -> tuple[int, int]:
  ok = isinstance(value, (list, tuple)) and len(value) == 2 and all(is_int(v) and v >= minimum for v in value)
  check(ok, f"{where}={value!r} must be a pair of ints >= {minimum} (X, Y)")
  return int(value[0]), int(value[1])


def check_entry(name: str, raw: Mapping[str, Any], where: str) -> MasterEntry:
  """A table entry as a :class:`MasterEntry`; ``where`` (e.g. the table's path) prefixes every message.

  A 3-D set (``in_size`` or ``downsample`` of three axes, as the official table's ``ns3d_*`` entries)
  is refused in one line: jaxlab's DPOT is the 2-D model (DPOT trains its 3-D sets with a separate
  model, models/dpot3d.py and finetune3d.py).
  """
  at = f"{where}: entry {name!r}"
  for key in ("in_size", "downsample"):
    value = raw.get(key)
    if isinstance(value, (list, tuple)) and len(value) == 3:
      raise InputError(f"{at} is a 3-D set ({key}={tuple(value)!r}); jaxlab's DPOT is 2-D (grids X, Y), so only "
                       "the table's 2-D sets can be trained on: leave this one out of data.names")
  unknown = sorted(set(raw) - set(DPOT_FIELDS) - set(JAXLAB_FIELDS))
  check(not unknown, f"{at} has unknown fields {unknown}; allowed: {', '.join(DPOT_FIELDS + JAXLAB_FIELDS)}")
  missing = [k for k in REQUIRED if k not in raw]
  check(not missing, f"{at} lacks {missing}; every entry needs {', '.join(REQUIRED)}")
  for key in ("train_path", "test_path"):
    check(isinstance(raw[key], str) and raw[key] != "", f"{at}: {key}={raw[key]!r} must be a non-empty path")
  for key, minimum in (("train_size", 1), ("test_size", 1), ("t_test", 1), ("t_in", 1), ("t_total", 2),
                       ("n_channels", 1), ("pred_channels", 1)):
    if raw.get(key) is not None:
      check(is_int(raw[key]) and raw[key] >= minimum, f"{at}: {key}={raw[key]!r} must be an int >= {minimum}")
  scatter = raw.get("scatter_storage", False)
  check(isinstance(scatter, bool), f"{at}: scatter_storage={scatter!r} must be True or False")
  fmt = raw.get("format", "dpot")
  check(fmt in FORMATS, f"{at}: format={fmt!r}; allowed: {', '.join(map(repr, FORMATS))}")
  check(not scatter or fmt == "dpot", f"{at}: scatter_storage=True is DPOT's layout; format={fmt!r} is not")
  fields = raw.get("fields", ())
  check(isinstance(fields, (list, tuple)) and all(isinstance(f, str) for f in fields),
        f"{at}: fields={fields!r} must be a list of field names")
  check(not fields or fmt in ("pdebench_cfd", "the_well"),
        f"{at}: fields is read for format 'pdebench_cfd' or 'the_well', not {fmt!r}")
  if raw.get("pred_channels") is not None and raw.get("n_channels") is not None:
    check(raw["pred_channels"] <= raw["n_channels"],
          f"{at}: pred_channels={raw['pred_channels']} exceeds n_channels={raw['n_channels']}")
  return MasterEntry(
      name=name, train_path=raw["train_path"], test_path=raw["test_path"], train_size=int(raw["train_size"]),
      test_size=int(raw["test_size"]), t_test=int(raw["t_test"]), scatter_storage=scatter, t_in=raw.get("t_in"),
      t_total=raw.get("t_total"),
      in_size=None if raw.get("in_size") is None else _pair(raw["in_size"], f"{at}: in_size", 1),
      n_channels=raw.get("n_channels"), downsample=_pair(raw.get("downsample", (1, 1)), f"{at}: downsample", 1),
      pred_channels=raw.get("pred_channels"), format=fmt, fields=tuple(fields))


def load_master(path: str, names: Sequence[str] = ()) -> dict[str, MasterEntry]:
  """The entries of the master table at ``path`` that a run uses, checked (:func:`load_table`, :func:`check_entry`).

  Only the entries named are checked, so a table with sets a run leaves out (the official one lists
  3-D sets beside the 2-D ones) loads as it is.

  Args:
    path: the master table's file.
    names: the entries to check and return, in this order; () = every entry, in the table's order.

  Returns:
    ``{name: MasterEntry}`` of the entries named.

  Raises:
    InputError: a name the table lacks, or a named entry that is not a valid 2-D set.
  """
  table = load_table(path)
  for name in names:
    check(name in table, f"master table {path} has no entry {name!r}; it has: {', '.join(table)}")
  where = f"master table {path}" + ("" if names else " (every entry is used: no names given)")
  return {name: check_entry(name, table[name], where) for name in (names or table)}


def resolve(path: str, root: str) -> str:
  """A table path made absolute: ``~`` expanded, a relative one joined to ``root``."""
  path = os.path.expanduser(path)
  return os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))
