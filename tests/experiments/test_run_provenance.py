"""Where a record comes from (`experiments/provenance.py`): every run names its own commit,
command and date (`run_provenance`), and a run trained from a dirty tree or by a command that
is not the record's own run.py is explained in its record's README; what makes a tree dirty,
and the code fingerprint a job checks."""

import json
import os
import pathlib
import subprocess

import pytest

from configs import vit_digits
from experiments import editions, provenance, runs
from experiments.generation import run as generation_run
from lfpe.errors import ConfigError

EXPERIMENTS = pathlib.Path(__file__).resolve().parents[2] / "experiments"
RESULTS = sorted(EXPERIMENTS.glob("**/results*.json"))  # partial records' too

# Recorded before runs carried their own provenance; their second editions (issue 38, equal
# tuning budgets, `experiments/editions.py`) carry it.
BEFORE_PER_RUN_PROVENANCE = {
  "detection",  # first edition, and its studies below
  "generation",  # first edition, and photo_crops
  "layout/templates",
  "position_study",  # sections, not runs: `run_provenance` per configuration since (its test)
  "resolution_redgreen",
  "similarity",  # two kernels' similarity maps, no training runs
}
# Runs a second edition reuses from its first, trained before per-run provenance: the layout
# record's 55 default-arm runs (experiments/layout/README.md says which).
UNSTAMPED_RUNS = {"layout/results.json": 55}


def _record(path: pathlib.Path) -> str:
  return str(path.relative_to(EXPERIMENTS))


def _checked(path: pathlib.Path) -> bool:
  parent = str(path.parent.relative_to(EXPERIMENTS))
  return not any(parent == old or parent.startswith(old + "/") for old in BEFORE_PER_RUN_PROVENANCE)


CHECKED = [path for path in RESULTS if _checked(path)]


def _runs(path: pathlib.Path) -> dict:
  results = json.loads(path.read_text())
  entries = results.get("runs", results)
  return {k: v for k, v in entries.items() if k != "provenance" and isinstance(v, dict)}


def test_the_records_held_to_it_are_found():
  """A record moved or renamed is not silently skipped."""
  names = {_record(path) for path in CHECKED}
  expected = {"digits_demo/results.json", "layout/results.json"}
  expected |= {"generation_v2/results.json", "resolution/results.json"}
  assert expected <= names


@pytest.mark.parametrize("path", CHECKED, ids=[_record(p) for p in CHECKED])
def test_every_run_of_a_record_carries_its_own_provenance(path):
  runs = _runs(path)
  assert runs, f"{_record(path)} holds no run"
  unstamped = [key for key, entry in runs.items() if "provenance" not in entry]
  assert len(unstamped) == UNSTAMPED_RUNS.get(_record(path), 0), unstamped[:5]
  record = path.parent.relative_to(EXPERIMENTS).parts[0]
  readme = (EXPERIMENTS / editions.family(record) / "README.md").read_text()  # an edition's too
  for key, entry in runs.items():
    stamp = entry.get("provenance")
    if stamp is None:
      continue
    assert {"commit", "command", "date", "own_command"} <= set(stamp), key
    if "dirty" in stamp:  # runs stamped since 2026-12-04 say it in a field of its own
      assert stamp["dirty"] == stamp["commit"].endswith(provenance.DIRTY), key
    if stamp["own_command"]:  # an experiment's run.py: this record's own, not another's
      own = f"experiments/{editions.family(record)}/run.py"
      assert stamp["command"].split()[1].endswith(own), (key, stamp["command"])
    if "+uncommitted" in stamp["commit"] or not stamp["own_command"] or stamp.get("read_back"):
      commit = stamp["commit"][:7]
      assert commit in readme, (
        f"{key} was trained from a dirty tree, by a foreign command ({stamp['command']}) or "
        "outside the record (read_back) "
        f"at {commit}, which {editions.family(record)}/README.md does not explain"
      )


def test_a_record_refuses_to_train_into_an_edition_without_per_run_provenance(tmp_path):
  """The generation record's command, pointed at its first edition, stops before training
  instead of mixing runs of two recipes; an --out of stamped runs (or none) goes on."""
  first = {"lsh/fourier/0": {"final": 1.0}, "provenance": {}}
  (tmp_path / "results.json").write_text(json.dumps(first))
  with pytest.raises(ConfigError, match=r"1 runs with no provenance .* lsh/fourier/0.*_v2"):
    generation_run.main([f"--out={tmp_path}", "--status"])
  stamped = {"lsh/fourier/0": {"final": 1.0, "provenance": {"commit": "abc"}}}
  editions.refuse_unstamped(str(tmp_path), stamped, newer="x_v2")
  editions.refuse_unstamped(str(tmp_path), {}, newer="x_v2")


def test_an_edition_adopts_only_the_choice_runs_it_lacks_each_marked_with_its_source(tmp_path):
  """`--choices-from`: the rate choice's and the sweep's runs of an earlier edition, each
  keeping its own stamp and naming where it came from; the earlier record runs and the runs
  this edition holds already stay as they are; the report says it once per source."""
  earlier = {
    "provenance": {"commit": "abc"},
    "recipe/lr=0.002/all/mlp/200": {"eval": {"AP": 0.1}, "provenance": {"commit": "abc"}},
    "sweep/all/mlp/input_scale=2/100": {"eval": {"AP": 0.2}, "provenance": {"commit": "abc"}},
    "sweep/all/mlp/input_scale=4/100": {"eval": {"AP": 0.3}},
    "all/mlp/0": {"eval": {"AP": 0.4}},
  }
  (tmp_path / "v2").mkdir()
  (tmp_path / "v2" / "results.json").write_text(json.dumps(earlier))
  results = {"sweep/all/mlp/input_scale=4/100": {"eval": {"AP": 0.5}}}
  adopted = editions.adopt(results, str(tmp_path / "v2"), ("sweep/", "recipe/"))
  assert sorted(adopted) == ["recipe/lr=0.002/all/mlp/200", "sweep/all/mlp/input_scale=2/100"]
  assert set(results) == {*adopted, "sweep/all/mlp/input_scale=4/100"}
  assert results["sweep/all/mlp/input_scale=4/100"] == {"eval": {"AP": 0.5}}  # its own kept
  for key in adopted:
    assert results[key] == {**earlier[key], editions.ADOPTED: str(tmp_path / "v2")}
  [said] = editions.adopted_markdown(results)
  assert said.startswith(f"2 runs were adopted from `{tmp_path / 'v2'}`")
  assert editions.adopted_markdown({"a/0": {}}) == []
  with pytest.raises(ConfigError, match=r"--choices-from=.*nowhere holds no results.json"):
    editions.adopt({}, str(tmp_path / "nowhere"), ("sweep/",))


def test_an_adopted_run_trained_with_other_flags_stops_the_record_naming_its_source():
  config = runs.for_run(vit_digits.get_config("small=1"), seed=0, steps=30)
  run = runs.Run("sweep/a/0", config, "/unused")
  adopted = {"steps": 4, editions.ADOPTED: "/tmp/quick"}
  with pytest.raises(SystemExit, match=r"steps=4, .* 30: it was adopted from /tmp/quick \(--ch"):
    runs.check_encodings([run], {run.key: adopted})


def test_a_run_keeps_the_stamp_of_the_invocation_that_trained_it(
  tmp_path, monkeypatch, fresh_stamp
):
  """The stamp goes into the workdir as the run trains: another invocation reading the run
  back (a record resumed at a later commit) records the trainer's, not its own; a workdir
  trained by code that wrote none (a driver script) is marked `read_back`."""
  stamps = iter([{"commit": c, "command": "x", "date": "d", "machine": {"cpu": "c"}} for c in "AB"])
  monkeypatch.setattr(provenance, "provenance", lambda: next(stamps))

  def train(config, workdir):  # a trainer that finishes its workdir
    os.makedirs(workdir, exist_ok=True)
    (pathlib.Path(workdir) / "summary.json").write_text(json.dumps({"step": 6}))
    return {"step": 6}

  monkeypatch.setattr(runs.trainer, "train_and_evaluate", train)
  config = runs.for_run(vit_digits.get_config("small=1"), seed=0, steps=6)
  run = runs.Run("a/0", config, str(tmp_path / "a"))
  score = lambda run, summary: {"score": 1.0}
  first = runs.execute([run], {}, score, lambda results: None)
  assert first["a/0"]["provenance"]["commit"] == "A"
  provenance.run_provenance.cache_clear()  # a later invocation, at commit B
  again = runs.execute([run], {}, score, lambda results: None)["a/0"]["provenance"]
  assert again["commit"] == "A" and "read_back" not in again
  (tmp_path / "a" / provenance.RUN_STAMP).unlink()  # as if trained outside a record
  provenance.run_provenance.cache_clear()
  stamps = iter([{"commit": "C", "command": "x", "date": "d", "machine": {"cpu": "c"}}])
  read = runs.execute([run], {}, score, lambda results: None)["a/0"]["provenance"]
  assert read["commit"] == "C" and read["read_back"]


def test_run_provenance_is_the_commit_the_process_started_with(monkeypatch, fresh_stamp):
  """Commits made while a record trains do not restamp its later runs: the stamp is taken once,
  when the process starts (experiments.cli.run), from the code it imported."""
  commits = iter(["aaa", "bbb+uncommitted changes"])
  fake = lambda *a, **k: {"commit": next(commits), "command": "c", "date": "d",
                          "machine": {"cpu": "x"}}  # fmt: skip
  monkeypatch.setattr(provenance, "provenance", fake)
  assert provenance.run_provenance()["commit"] == "aaa"
  assert provenance.run_provenance()["commit"] == "aaa"  # not "bbb...", committed later


def test_another_records_progress_does_not_make_the_tree_dirty():
  """Two records running in one tree: the other's results.json changing is data, not code."""
  porcelain = (
    " M experiments/layout/results.json\0 M experiments/layout/checks.json\0"
    " M lfpe/encodings/rotary.py\0R  experiments/b/run.py\0experiments/a/run.py\0"
  )
  assert provenance.code_changes(porcelain) == ["lfpe/encodings/rotary.py", "experiments/b/run.py"]
  assert provenance.code_changes(" M experiments/resolution/results.json\0") == []
  assert provenance.code_changes("") == []


def test_an_untracked_module_makes_the_tree_dirty_an_untracked_report_does_not():
  """A new .py file under lfpe/, configs/ or experiments/ is code a run may import; a record's
  new report, figure or scratch file elsewhere is not."""
  porcelain = (
    "?? lfpe/encodings/new.py\0?? configs/mine.py\0?? experiments/x/claims.json\0"
    "?? experiments/x/plot.png\0?? notes.py\0?? experiments/x/results.json\0"
  )
  assert provenance.code_changes(porcelain) == ["lfpe/encodings/new.py", "configs/mine.py"]


def test_code_changes_reads_gits_own_status_names_with_spaces_and_accents_included(
  tmp_path, monkeypatch
):
  """What `git status --porcelain -z` prints (not a hand-written string): a rename, a name
  with a space, and an untracked module whose name git would quote without -z."""
  git = lambda *args: subprocess.run(["git", "-C", str(tmp_path), *args], check=True,
                                     capture_output=True, text=True).stdout  # fmt: skip
  git("init", "-q")
  (tmp_path / "lfpe").mkdir()
  (tmp_path / "lfpe" / "a.py").write_text("x = 1\n")
  git("add", ".")
  git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
  git("mv", "lfpe/a.py", "lfpe/b c.py")
  (tmp_path / "lfpe" / "é.py").write_text("y = 2\n")
  changed = provenance.code_changes(git("status", "--porcelain", "-z", "--untracked-files=all"))
  assert changed == ["lfpe/b c.py", "lfpe/é.py"]
  (tmp_path / "lfpe" / "a\udce9.py").write_bytes(b"")  # a Latin-1 name, not UTF-8
  monkeypatch.setattr(provenance, "ROOT", str(tmp_path))
  assert provenance._commit().endswith(provenance.DIRTY)  # read, not a UnicodeDecodeError


def test_the_code_fingerprint_follows_the_trained_codes_contents_not_commits(tmp_path, monkeypatch):
  git = lambda *args: subprocess.run(["git", "-C", str(tmp_path), *args], check=True,
                                     capture_output=True)  # fmt: skip
  git("init", "-q")
  git("config", "user.email", "t@t")
  git("config", "user.name", "t")
  (tmp_path / "lfpe").mkdir()
  (tmp_path / "experiments").mkdir()
  (tmp_path / "lfpe" / "a.py").write_text("x = 1\n")
  (tmp_path / "experiments" / "b.py").write_text("y = 1\n")
  git("add", ".")
  git("commit", "-qm", "one")
  monkeypatch.setattr(provenance, "ROOT", str(tmp_path))
  start = provenance.code_fingerprint()
  (tmp_path / "experiments" / "b.py").write_text("y = 2\n")  # not trained code
  git("commit", "-qam", "elsewhere")
  assert provenance.code_fingerprint() == start
  provenance.same_code(start)  # the same library: the job trains
  (tmp_path / "lfpe" / "a.py").write_text("x = 2\n")
  edited = provenance.code_fingerprint()
  assert edited != start
  with pytest.raises(ConfigError, match="changed since this record started"):
    provenance.same_code(start)
  git("commit", "-qam", "the edit, committed")
  assert provenance.code_fingerprint() == edited  # contents, not commits
  (tmp_path / "lfpe" / "new module.py").write_text("z = 1\n")  # untracked, a space in its name
  assert provenance.code_fingerprint() not in (edited, None)
  provenance.same_code(None)  # a caller that passes no fingerprint is not checked


def test_a_runs_stamp_names_its_cpu_and_instruction_set(monkeypatch, fresh_stamp):
  """Two hosts of one CPU name may compile other code; the per-run stamp keeps the ISA
  extensions the record's stamp lists (`claims.machines_markdown` tells them apart)."""
  machine = {"cpu": "AMD EPYC", "isa": ["avx2", "fma"], "cores": 2}
  fake = lambda *a, **k: {"commit": "a", "command": "c", "date": "d", "machine": machine}
  monkeypatch.setattr(provenance, "provenance", fake)
  stamp = provenance.run_provenance()
  assert (stamp["cpu"], stamp["isa"]) == ("AMD EPYC", ["avx2", "fma"]) and "cores" not in stamp
