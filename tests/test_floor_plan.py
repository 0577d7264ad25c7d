"""The floor plan of `lfpe/`: which package may import which, checked on every import.

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
  "tasks": ("checked", "data", "encodings", "errors", "extras", "models", "nn"),
  "train": ("checked", "data", "encodings", "errors", "extras", "models", "nn", "tasks"),
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
