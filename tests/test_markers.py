"""Every test that starts lfpe's command line (`cli_helpers.run_main` / `start_main`, directly
or through a helper of its module) carries the `cli` marker, by which .ci/run's latest-stack
leg leaves it out: one without it would slow that leg past its cutoff unnoticed."""

import ast
import pathlib

TESTS = pathlib.Path(__file__).parent
STARTERS = {"run_main", "start_main"}


def _called(node: ast.AST) -> set[str]:
  return {
    n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
  }


def _marked_cli(decorators: list[ast.expr]) -> bool:
  return any("pytest.mark.cli" in ast.unparse(d) for d in decorators)


def _unmarked_starters(tree: ast.Module) -> list[str]:
  """The module's test functions that start the command line without the `cli` marker."""
  if any(
    isinstance(n, ast.Assign)
    and any(getattr(t, "id", None) == "pytestmark" for t in n.targets)
    and "pytest.mark.cli" in ast.unparse(n.value)
    for n in tree.body
  ):
    return []
  functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
  starters = set(STARTERS)
  while True:  # helpers that call a starter, to a fixed point
    more = {name for name, f in functions.items() if _called(f) & starters} - starters
    if not more:
      break
    starters |= more
  return [
    name
    for name, f in functions.items()
    if name.startswith("test_") and name in starters and not _marked_cli(f.decorator_list)
  ]


def test_every_test_that_starts_the_command_line_is_marked_cli():
  unmarked = {
    str(path.relative_to(TESTS)): names
    for path in sorted(TESTS.rglob("test_*.py"))
    if (names := _unmarked_starters(ast.parse(path.read_text())))
  }
  assert not unmarked, f"add @pytest.mark.cli (or a module's pytestmark): {unmarked}"


def test_the_check_finds_a_starter_reached_through_a_helper():
  tree = ast.parse(
    "def _run():\n  return run_main('--help')\n\n"
    "def test_a():\n  _run()\n\n"
    "@pytest.mark.cli\ndef test_b():\n  start_main()\n\n"
    "def test_c():\n  pass\n"
  )
  assert _unmarked_starters(tree) == ["test_a"]
