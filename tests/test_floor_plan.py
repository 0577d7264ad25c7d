"""The floor plan of `lfpe/`: which package may import which, checked on every import; and
no module of the repository imports, even from inside a function, one that imports it back.

Each entry of FLOOR_PLAN is a unit of `lfpe/` (a subpackage or a top-level module) and the
units it may import; the plan is layered (no cycles), `lfpe/` never imports the
repository's experiments, configs, benchmarks or tests, and docs/code_map.md shows the plan
line for line. A new import that goes upward fails here, naming the file, the import and
what its unit may import instead.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# unit: the units it may import (bottom to top).
FLOOR_PLAN = {
  "errors": (),
  "checked": (),
  "extras": ("errors",),
  "encodings": ("checked", "errors"),
  "nnx": ("encodings",),
  "nn": ("checked", "encodings"),
  "resolution": ("encodings",),
  "models": ("checked", "encodings", "nn", "resolution"),
  "data": ("errors", "extras", "resolution"),
  "tasks": ("checked", "data", "encodings", "errors", "extras", "models", "nn", "resolution"),
  "train": (
    "checked",
    "data",
    "encodings",
    "errors",
    "extras",
    "models",
    "nn",
    "resolution",
    "tasks",
  ),
  "analysis": ("encodings", "extras", "models", "nn"),
  "studies": ("data", "encodings", "errors", "extras", "models", "nn", "tasks", "train"),
  "main": ("errors", "train"),
}
OUTSIDE = ("experiments", "configs", "benchmarks", "tests")  # the repository, not the library


def unit_of(path: pathlib.Path, package: pathlib.Path) -> str:
  """`lfpe/encodings/fourier.py` -> 'encodings'; `lfpe/main.py` -> 'main'."""
  parts = path.relative_to(package).with_suffix("").parts
  return parts[0]


def imports(path: pathlib.Path, package: pathlib.Path) -> list[tuple[int, str]]:
  """(line, top-level name) of every import in `path`: lfpe units as 'encodings', others as
  their first name ('experiments', 'jax', ...)."""
  found = []
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level:
      names = ["relative import"]  # lfpe imports absolutely: the plan reads every edge
    elif isinstance(node, ast.ImportFrom):
      top = node.module.split(".")
      names = [f"lfpe.{a.name}" for a in node.names] if top == ["lfpe"] else [node.module]
    else:
      continue
    for name in names:
      parts = name.split(".")
      found.append((node.lineno, parts[1] if parts[0] == "lfpe" and len(parts) > 1 else parts[0]))
  return found


def violations(package: pathlib.Path) -> list[str]:
  """Every import in `package` that its unit's line of FLOOR_PLAN does not allow."""
  found = []
  for path in sorted(package.rglob("*.py")):
    unit = unit_of(path, package)
    if unit == "__init__":
      continue
    allowed = {unit, *FLOOR_PLAN.get(unit, ())}
    for line, name in imports(path, package):
      upward = name in FLOOR_PLAN and name not in allowed
      if upward or name in (*OUTSIDE, "relative import") or unit not in FLOOR_PLAN:
        where = f"{path.relative_to(package.parent)}:{line}"
        found.append(
          f"{where} imports {name!r}; lfpe/{unit} may import {sorted(allowed - {unit})}"
          if unit in FLOOR_PLAN
          else f"{where}: lfpe/{unit} is not in the floor plan (tests/test_floor_plan.py)"
        )
  return found


def test_every_import_in_lfpe_follows_the_floor_plan():
  assert violations(ROOT / "lfpe") == []


def test_the_floor_plan_is_layered():
  """Each unit imports only units listed before it: no cycle can form."""
  order = list(FLOOR_PLAN)
  for unit, allowed in FLOOR_PLAN.items():
    assert all(order.index(a) < order.index(unit) for a in allowed), unit


@pytest.mark.parametrize(
  "where, source",
  [
    ("encodings/upward.py", "from lfpe.train import trainer\n"),
    ("nn/upward.py", "import lfpe.models.vit\n"),
    ("models/outside.py", "from experiments import stats\n"),
    ("data/relative.py", "from ..train import trainer\n"),
    ("newroom/x.py", "import numpy\n"),
  ],
)
def test_an_upward_import_fails_the_check(tmp_path, where, source):
  """The check can fail: a copy of lfpe/ with one deliberate upward import is reported."""
  package = tmp_path / "lfpe"
  for path in (ROOT / "lfpe").rglob("*.py"):
    (package / path.relative_to(ROOT / "lfpe")).parent.mkdir(parents=True, exist_ok=True)
    (package / path.relative_to(ROOT / "lfpe")).write_text(path.read_text())
  (package / where).parent.mkdir(exist_ok=True)
  (package / where).write_text(source)
  [found] = violations(package)
  assert found.startswith(f"lfpe/{where}:1")


def test_the_code_map_shows_the_floor_plan():
  text = (ROOT / "docs" / "code_map.md").read_text()
  for unit, allowed in FLOOR_PLAN.items():
    line = f"| `{unit}` | {', '.join(allowed) or '(nothing of lfpe)'} |"
    assert line in text, f"docs/code_map.md lacks the floor-plan row {line}"


@pytest.mark.parametrize("folder", ["lfpe", "benchmarks", "experiments"])
def test_the_code_map_names_every_module(folder):
  """docs/code_map.md names each module of `folder` (experiments: its top-level ones) on the
  line of its folder, so the map cannot drift from the tree."""
  text = (ROOT / "docs" / "code_map.md").read_text()
  files = (ROOT / folder).rglob("*.py") if folder != "experiments" else (ROOT / folder).glob("*.py")
  missing = [
    str(path.relative_to(ROOT))
    for path in files
    if path.name != "__init__.py" and path.name not in text
  ]
  assert missing == []


def import_graph(root: pathlib.Path, folders=("lfpe", "experiments", "benchmarks", "configs")):
  """{module: the repository modules it imports}, over every `.py` under `folders`: imports at
  any depth (a function's deferred import too) but those under `if TYPE_CHECKING:`, which
  only annotations read; `from pkg import sub` is an edge to the module `pkg.sub`."""
  paths = {}
  for folder in folders:
    for path in (root / folder).rglob("*.py"):
      parts = path.relative_to(root).with_suffix("").parts
      paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
  graph = {}
  for module, path in paths.items():
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
      id(n)
      for block in ast.walk(tree)
      if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
      for n in ast.walk(block)
    }
    found = set()
    for node in ast.walk(tree):
      if id(node) in typing_only:
        continue
      if isinstance(node, ast.Import):
        found |= {alias.name for alias in node.names}
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        subs = {f"{node.module}.{alias.name}" for alias in node.names}
        found |= {sub if sub in paths else node.module for sub in subs}
    graph[module] = (found & set(paths)) - {module}
  return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The import cycles of `graph`: its strongly connected components of two or more modules."""
  order, low, stack, found = {}, {}, [], []

  def visit(module):
    order[module] = low[module] = len(order)
    stack.append(module)
    for other in sorted(graph[module]):
      if other not in order:
        visit(other)
        low[module] = min(low[module], low[other])
      elif other in stack:
        low[module] = min(low[module], order[other])
    if low[module] == order[module]:
      component = stack[stack.index(module) :]
      del stack[stack.index(module) :]
      if len(component) > 1:
        found.append(sorted(component))

  for module in sorted(graph):
    if module not in order:
      visit(module)
  return found


def test_no_module_imports_one_that_imports_it_back():
  """A cycle, even one a deferred import inside a function hides, is two modules that each
  need the other: move what both need into one of them (or a third)."""
  assert cycles(import_graph(ROOT)) == []


@pytest.mark.parametrize("guarded, expected", [(False, [["pkg.a", "pkg.b"]]), (True, [])])
def test_a_deferred_import_cycle_is_found_and_a_typing_only_one_is_not(tmp_path, guarded, expected):
  (tmp_path / "pkg").mkdir()
  (tmp_path / "pkg" / "a.py").write_text("from pkg import b\n")
  back = "def f():\n  from pkg import a\n"
  if guarded:
    back = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n  from pkg import a\n"
  (tmp_path / "pkg" / "b.py").write_text(back)
  assert cycles(import_graph(tmp_path, folders=("pkg",))) == expected
