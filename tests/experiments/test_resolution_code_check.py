"""`experiments.resolution.code_check`: an arm equal in two trees, or what differs."""

import pytest

from experiments.resolution import code_check


def test_compare_says_equal_only_where_parameters_and_every_test_match():
  tests = {"eval": {"loss": 1.5}, "eval/pi_128px": {"loss": 1.25}}
  old = {
    "a": {"params": "x", "tests": tests},
    "b": {"params": "x", "tests": tests},
    "c": {"params": "x", "tests": tests},
    "gone": {"params": "x", "tests": tests},
    "broken": {"error": "ValueError: no such policy"},
  }
  new = {
    "a": {"params": "x", "tests": tests},
    "b": {"params": "y", "tests": tests},
    "c": {"params": "x", "tests": {**tests, "eval/pi_128px": {"loss": 1.2500001}}},
    "broken": {"params": "x", "tests": tests},
    "added": {"params": "x", "tests": tests},
    "planned": {"params": "x", "tests": {"eval": {"loss": 1.5}, "eval/ntk_128px": {}}},
  }
  old["planned"] = old["a"]
  assert code_check.compare(old, new) == [
    "a: equal (2 tests)",
    "added: only in this tree",
    "b: DIFFERS (parameters differ; tests differing: none)",
    "broken: error: ValueError: no such policy",
    "c: DIFFERS (parameters equal; tests differing: eval/pi_128px)",
    "gone: only in the baseline",
    "planned: equal (1 tests; only in the baseline: eval/pi_128px; only in this tree: "
    "eval/ntk_128px)",
  ]


@pytest.mark.slow  # two processes train an arm 4 steps and test it: about a minute
def test_this_tree_against_itself_is_equal(capsys):
  [line] = code_check.main(["--baseline", code_check.ROOT, "--arms", "rope_axial"])
  assert line == "rope_axial: equal (6 tests)", line


def test_a_baseline_that_is_no_tree_is_refused(tmp_path, capsys):
  with pytest.raises(SystemExit):
    code_check.main(["--baseline", str(tmp_path)])
  assert "--baseline must be a worktree" in capsys.readouterr().err
