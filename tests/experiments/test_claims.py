"""Every committed claims.json: each verdict is the one its interval gives, and the record
beside it says where it comes from (commit, command, machine, libraries, date)."""

import collections
import json
import pathlib
import shutil

import pytest

from experiments import claims, editions, provenance, recipe, refresh, stats
from experiments.provenance import FIELDS
from experiments.stats import check_claim

EXPERIMENTS = pathlib.Path(__file__).resolve().parents[2] / "experiments"
CLAIMS = sorted(EXPERIMENTS.glob("**/claims.json"))  # archived records' too
IDS = [str(p.parent.relative_to(EXPERIMENTS)) for p in CLAIMS]


@pytest.mark.parametrize("path", CLAIMS, ids=IDS)
def test_every_verdict_follows_its_interval(path):
  entries = json.loads(path.read_text())
  assert entries, f"{path} holds no claim"
  for entry in entries:
    check_claim(entry)


@pytest.mark.parametrize("path", CLAIMS, ids=IDS)
def test_the_record_beside_the_claims_has_provenance(path):
  results = json.loads((path.parent / "results.json").read_text())
  records = results["settings"].values() if "settings" in results else [results]
  for record in records:
    assert set(FIELDS) <= set(record.get("provenance", {})), f"{path.parent}: no provenance"


CURRENT = sorted(EXPERIMENTS.glob("*/claims.json"))  # the records' own (not archived ones)


@pytest.mark.parametrize("path", CURRENT, ids=[p.parent.name for p in CURRENT])
def test_every_claim_says_its_source_tuning_and_family_adjusted_verdict(path):
  """Each claim of a current record says whether the paper states it or lfpe reads it from a
  table, how its arms were tuned, the paper's own a − b (null where it gives none) and the
  ratio to it, its Holm verdict within the record, recomputed here, (an equivalence claim) a
  margin by the one rule, and (a record that checks its length) whether its arms settled."""
  entries = json.loads(path.read_text())
  assert len({"settled" in e for e in entries}) <= 1, "a record checks every claim's length or none"
  for entry in entries:
    assert entry["source"] in stats.SOURCES and entry["tuned"], entry["claim"]
    if "settled" in entry and not entry["settled"]:  # names the arms that failed or went unchecked
      assert entry["unsettled" if entry["settled"] is False else "unchecked"], entry["claim"]
    stats.check_margin(entry)
    stats.check_paper_ratio(entry)
  assert [e["holm_verdict"] for e in entries] == stats.holm(entries)


@pytest.mark.parametrize("name", refresh.names())
def test_the_committed_reports_are_what_the_results_give(name, tmp_path):
  """`python -m experiments.refresh NAME` on a copy of the record rewrites nothing: its
  claims.json, tables and README are exactly what the current report code makes of its
  committed results (a report changed without its record, or a hand edit, fails here)."""
  out = tmp_path / name
  shutil.copytree(EXPERIMENTS / name, out, ignore=shutil.ignore_patterns("runs", "*.png"))
  refresh.RECORDS[editions.family(name)](out)
  for made in sorted(out.glob("*.md")) + [out / "claims.json"]:
    assert made.read_text() == (EXPERIMENTS / name / made.name).read_text(), made.name


def test_refresh_reports_an_edition_named_once_its_results_are_copied_in(tmp_path, monkeypatch):
  """A worktree's finished edition: results.json copied into the checkout, no claims.json yet.
  Named, it is reported by the checkout's code; unnamed, it is left out, as is a stray folder."""
  for folder, files in {
    "detection_v3": ["results.json"],
    "layout": ["results.json", "claims.json"],
  }.items():
    for name in files:
      (tmp_path / folder).mkdir(exist_ok=True)
      (tmp_path / folder / name).write_text("{}")
  (tmp_path / "scratch").mkdir()
  (tmp_path / "scratch" / "results.json").write_text("{}")
  monkeypatch.setattr(refresh, "ROOT", tmp_path)
  monkeypatch.setattr(editions, "finished", lambda root: {"layout": ["layout"]})
  reported = []
  monkeypatch.setattr(refresh, "RECORDS", {k: reported.append for k in ("detection", "layout")})
  monkeypatch.setattr(refresh.summary, "main", lambda argv: None)
  monkeypatch.setattr(refresh.which_encoding, "write", lambda: None)
  assert refresh.unreported() == ["detection_v3"]
  refresh.main([])
  assert reported == [tmp_path / "layout"]
  refresh.main(["detection_v3"])
  assert reported[-1] == tmp_path / "detection_v3"
  with pytest.raises(SystemExit, match="unknown records \\['scratch'\\]"):
    refresh.main(["scratch"])


def test_unfitted_table_rereads_each_tuned_claim_without_the_seeds_the_sweep_trained():
  """A toy record: b's tuned runs score 1 point below a's at every seed, but 3 below at the
  seeds the sweep trained too; the table reads the tuned claim on seeds 2-4 alone."""
  results = {f"sweep/a/theta=1.0/{s}": {} for s in (0, 1)}
  for seed in range(5):
    results[f"a/theta=4.0/{seed}"] = {"v": 10.0 + seed}
    results[f"b/theta=4.0/{seed}"] = {"v": 9.0 + seed - 2 * (seed < 2)}

  def claims_of(res):
    def values(arm):
      return [e["v"] for k, e in sorted(res.items()) if k.startswith(f"{arm}/theta")]

    a, b = values("a"), values("b")
    diff = [x - y for x, y in zip(a, b, strict=True)]
    mean, half = stats.interval(diff)
    low, high = mean - half, mean + half
    verdict = "reproduced" if low > 0 else "unresolved"
    return [
      {"claim": "a above b (each tuned)", "tuned": "a, b: each one's knob", "n": len(diff),
       "difference": mean, "ci_low": low, "ci_high": high, "verdict": verdict},
      {"claim": "a above b", "tuned": "none: every arm at its defaults", "n": 5,
       "difference": 0.0, "ci_low": -1.0, "ci_high": 1.0, "verdict": "unresolved"},
    ]  # fmt: skip

  lines = claims.unfitted_markdown(claims_of, results)
  assert lines[0].endswith("(seeds 2 on)")
  rows = [line for line in lines if line.startswith("| a above b")]
  assert len(rows) == 1  # the defaults claim is not re-read
  cells = [c.strip() for c in rows[0].split("|")[1:-1]]
  assert cells[1].startswith("+1.80 ") and cells[2] == "5"  # (3 + 3 + 1 + 1 + 1) / 5
  assert cells[3] == "+1.00 [+1.00, +1.00]" and cells[4] == "3" and cells[5] == "reproduced"
  assert (
    "Of the 1 resolved over all seeds, 1 have two later seeds or more and 1 of those keep"
    in " ".join(lines)
  )
  del results["sweep/a/theta=1.0/0"], results["sweep/a/theta=1.0/1"]
  assert claims.unfitted_markdown(claims_of, results) == []


def _toy_claims(res):
  """One claim, a above b, paired over the seeds both arms ran ("v" of `a/<seed>`, `b/<seed>`)."""
  value = lambda arm: {k.split("/")[-1]: e["v"] for k, e in res.items() if k.startswith(f"{arm}/")}
  a, b = value("a"), value("b")
  diff = [a[seed] - b[seed] for seed in sorted(a.keys() & b.keys())]  # paired on shared seeds
  mean, half = stats.interval(diff)
  verdict = "reproduced" if mean - half > 0 else "unresolved"
  return [
    {"claim": "a above b", "tuned": "none", "n": len(diff), "difference": mean,
     "ci_low": mean - half, "ci_high": mean + half, "verdict": verdict}
  ]  # fmt: skip


def test_machines_table_names_each_seeds_cpus_and_rereads_without_the_mixed_seeds():
  """A toy record: seed 1's b ran on another CPU and scored 3 below a there, 1 elsewhere; the
  re-read leaves seed 1's pair out. Sweep, rate and length runs (seeded keys too) are not
  counted."""
  stamp = lambda cpu: {"provenance": {"cpu": cpu}}
  results = {"provenance": {"commit": "x"}, "sweep/a/theta=1.0/1": stamp("Other CPU")}
  results |= {"recipe/lr=0.001/a/1": stamp("Other CPU"), "length/a/1": stamp("Other CPU")}
  for seed in range(5):
    results[f"a/{seed}"] = {"v": 10.0 + seed, **stamp("AMD EPYC")}
    cpu = "Intel Xeon" if seed == 1 else "AMD EPYC"
    results[f"b/{seed}"] = {"v": 9.0 + seed - 2 * (seed == 1), **stamp(cpu)}
  lines = claims.machines_markdown(_toy_claims, results)
  assert lines[:6] == [
    "## Where each seed trained", "", "| seed | record runs by CPU |", "|---|---|",
    "| 0 | AMD EPYC: 2 |", "| 1 | AMD EPYC: 1, Intel Xeon: 1 |",
  ]  # fmt: skip
  assert lines[10].startswith("Seed 1 trained on more than one CPU, so some of its paired")
  assert "on each CPU read as a seed of their own, so that a pair across CPUs" in lines[10]
  assert "Of the 1 resolved over all seeds, 1 have two such seeds or more" in lines[10]
  cells = [c.strip() for c in lines[-2].split("|")[1:-1]]
  assert cells[1].startswith("+1.40 ") and cells[2] == "5"  # (1 + 3 + 1 + 1 + 1) / 5
  assert cells[3:] == ["+1.00 [+1.00, +1.00]", "4", "reproduced"]
  results["c/1"] = {"v": 0.0}  # unstamped: counted, and it makes no seed mixed
  epyc = lambda *isa: {"v": 0.0, "provenance": {"cpu": "AMD EPYC", "isa": list(isa)}}
  results["c/2"], results["d/2"] = epyc("avx2", "fma"), epyc("avx2")  # another ISA: mixed
  results["c/3"] = epyc("avx2")  # an older stamp, "AMD EPYC" alone, matches its name
  lines = claims.machines_markdown(_toy_claims, results)
  assert lines[5] == "| 1 | AMD EPYC: 1, Intel Xeon: 1, no stamp of its own: 1 |"
  assert lines[6] == "| 2 | AMD EPYC: 2, AMD EPYC (avx2): 1, AMD EPYC (avx2, fma): 1 |"
  assert lines[10].startswith("Seeds 1, 2 trained on more than one CPU, so some of their")
  groups = claims._cpu_groups(collections.Counter(provenance.run_cpu(results[k]) for k in
                                                   ("a/2", "b/2", "c/2", "d/2")))  # fmt: skip
  assert len(set(groups.values())) == 3  # two extension sets, and a bare name matching both
  assert lines[10].endswith("1 run predates the per-run stamp (2026-11-27): where it trained "
                            "is not recorded. 4 runs stamped before 2026-12-05 name their CPU "
                            "without its instruction-set extensions, matched to a stamp that "
                            "has them by the name alone (two hosts of one name may compile "
                            "other code).")  # fmt: skip


def test_machines_table_says_one_cpu_per_seed_and_what_was_never_stamped():
  results = {f"{arm}/{seed}": {"v": 1.0, "provenance": {"cpu": f"CPU {seed}"}}
             for arm in "ab" for seed in range(2)}  # fmt: skip
  assert (
    claims.machines_markdown(_toy_claims, results)[-2] == "Each seed's runs trained on one CPU."
  )
  results["c/0"], results["c/1"] = {"v": 1.0}, {"v": 1.0, "provenance": "?"}  # unstamped
  assert claims.machines_markdown(_toy_claims, results)[-2] == (
    "Each seed's stamped runs trained on one CPU. 2 runs predate the per-run stamp "
    "(2026-11-27): where they trained is not recorded."
  )
  assert claims.machines_markdown(_toy_claims, {"a/0": {"v": 1.0}}) == []
  results = {f"{arm}/0": {"v": 1.0, "provenance": {"cpu": "EPYC"}} for arm in "ab"}
  results["c/0"] = {"v": 1.0, "provenance": {"cpu": "EPYC", "isa": ["avx2"]}}
  assert claims.machines_markdown(_toy_claims, results)[-2] == (
    "Each seed's runs trained on one CPU, as far as their stamps tell. 2 runs stamped before "
    "2026-12-05 name their CPU without its instruction-set extensions, matched to a stamp that "
    "has them by the name alone (two hosts of one name may compile other code)."
  )


def test_a_reread_finds_a_control_whose_best_arm_changed_and_says_which_it_compares():
  """On fewer seeds another arm may be the best: the control is the same claim (its paper,
  item, metric and reading) under another text; a claim left with one seed shows "< 2"."""
  claim = lambda text, a, n=5, diff=1.0: {
    "claim": text, "paper": "lfpe", "item": "control", "metric": "AP", "tuned": "none",
    "a": a, "b": "none", "n": n, "difference": diff, "ci_low": diff - 0.5,
    "ci_high": diff + 0.5, "verdict": "reproduced",
  }  # fmt: skip
  every = {"control (A, the best)": claim("control (A, the best)", "A")}
  again = {"control (B, the best)": claim("control (B, the best)", "B", n=3, diff=2.0)}
  summary, table = claims._reread(every, again, "fewer seeds", "later")
  assert table[2].endswith("| 3 | reproduced (B − none there) |")
  assert summary.startswith("Of the 1 resolved over all seeds, 1 have two later seeds")
  again = {"control (B, the best)": claim("control (B, the best)", "B", n=1)}
  assert claims._reread(every, again, "fewer seeds", "later")[1][2].endswith("| – | < 2 | – |")


def test_a_pair_on_the_fewer_runs_cpu_of_a_split_seed_keeps_that_seed():
  """Seed 1 split: a and b on a Xeon (2 runs), three other arms on an EPYC (3 runs): the claim
  a above b keeps seed 1, its own pair being on one CPU (all 5 seeds), where leaving the seed
  or its less common CPU out would not."""
  stamp = lambda cpu: {"provenance": {"cpu": cpu}}
  results = {f"{arm}/{seed}": {"v": 10.0 + seed - (arm == "b"), **stamp("EPYC")}
             for arm in "ab" for seed in range(5)}  # fmt: skip
  results["a/1"]["provenance"] = results["b/1"]["provenance"] = {"cpu": "Xeon"}
  results |= {f"{arm}/1": {"v": 0.0, **stamp("EPYC")} for arm in "xyz"}
  lines = claims.machines_markdown(_toy_claims, results)
  assert lines[-2].endswith("| +1.00 [+1.00, +1.00] | 5 | reproduced |")
  results |= {f"{arm}/{seed}": {"v": 0.0, **stamp("Xeon")} for arm in "xy" for seed in (2, 3)}
  lines = claims.machines_markdown(_toy_claims, results)  # seeds 2, 3 split the other way
  assert "Seeds 1, 2, 3 trained on more than one CPU" in lines[10]
  assert lines[-2].endswith("| +1.00 [+1.00, +1.00] | 5 | reproduced |")  # Xeon, EPYC, EPYC


def test_cpu_groups_join_a_bare_name_to_its_one_stamp_with_extensions():
  """A stamp without extensions (before 2026-12-05) is the CPU of its name where one stamp
  of that name has them; next to two, it could be either, so it is a group of its own."""
  epyc, avx2, fma = ("EPYC", None), ("EPYC", ("avx2",)), ("EPYC", ("fma",))
  groups = claims._cpu_groups(collections.Counter([epyc, epyc, avx2, ("Xeon", None), None]))
  assert groups[epyc] == groups[avx2] != groups[("Xeon", None)] and None not in groups
  groups = claims._cpu_groups(collections.Counter([epyc, avx2, fma]))
  assert len(set(groups.values())) == 3


def test_split_by_cpu_renames_the_other_cpus_runs_and_keeps_the_rest():
  stamp = lambda cpu: {"v": 1.0, "provenance": {"cpu": cpu}}
  results = {"a/1": stamp("EPYC"), "b/1": stamp("Xeon"), "c/1": {"v": 1.0}, "a/0": stamp("Xeon")}
  groups = {1: {("EPYC", None): 0, ("Xeon", None): 1}}
  split = claims._split_by_cpu(results, groups)
  assert sorted(split) == ["a/0", "a/1", f"b/{claims.SPLIT + 1}", "c/1"]
  assert split[f"b/{claims.SPLIT + 1}"]["seed"] == claims.SPLIT + 1


@pytest.mark.parametrize(
  ("a_b_cpu", "other_cpu", "seeds"),
  [
    ({"cpu": "EPYC"}, {"cpu": "Xeon", "isa": ["avx2"]}, range(4)),  # an older stamp beside a new
    ({"cpu": "Xeon"}, {"cpu": "EPYC"}, range(3)),  # pairs on the other CPU of every split seed
  ],
)
def test_every_pair_on_one_cpu_stays_in_the_reread(a_b_cpu, other_cpu, seeds):
  """a and b of seeds 1 on ran on one CPU, a third arm on another: every seed's pair stays, as
  paired seeds (a search over one CPU per seed lost them here: an unstamped-extensions choice
  never offered, a claim gone Welch at the base)."""
  results = {f"{arm}/0": {"v": 10.0 - (arm == "b"), "provenance": {"cpu": "EPYC"}} for arm in "ab"}
  for seed in seeds[1:]:
    results |= {f"{arm}/{seed}": {"v": 10.0 + seed - (arm == "b"), "provenance": a_b_cpu}
                for arm in "ab"}  # fmt: skip
    results[f"c/{seed}"] = {"v": 0.0, "provenance": other_cpu}
  lines = claims.machines_markdown(_toy_claims, results)
  assert lines[-2].endswith(f"| +1.00 [+1.00, +1.00] | {len(seeds)} | reproduced |")


def _entry(a: str, b: str) -> dict:
  c = stats.claim(paper="002", item="T", text=f"{a} beats {b}", metric="m", a=a, b=b,
                  a_values=[2.0, 3.0, 4.0], b_values=[1.0, 1.5, 1.0], paired=True,
                  tuned=stats.AT_DEFAULTS)  # fmt: skip
  return {**c, "holm_verdict": c["verdict"]}


def test_a_claim_on_an_arm_that_failed_the_length_rule_says_it_is_read_before_settling():
  entries = [_entry("x", "y"), _entry("x", "z"), _entry("z", "w"), _entry("x", "v")]
  checked = {"x": True, "y": False, "z": True, "w": False, "v": None}  # v: too short to read
  marked = claims.mark_settling(entries, checked)
  assert [c["settled"] for c in marked] == [False, True, False, None]
  assert marked[0]["unsettled"] == ["y"] and "unsettled" not in marked[1]
  assert marked[3]["unchecked"] == ["v"]
  table = claims.markdown(marked).splitlines()
  assert "(read before y settled: the length rule)" in table[2]
  assert "settled" not in table[3] and "(read before w settled" in table[4]
  assert "(length not checked for v)" in table[5]
  assert claims.mark_settling(entries, None) == entries  # no curves: no length was checked
  absent = claims.mark_settling(entries[:1], {"x": True})[0]  # an arm the check never saw
  assert absent["settled"] is None and absent["unchecked"] == ["y"]


def test_detections_gap_claims_are_marked_by_either_arm_of_either_gap():
  from experiments.detection import report  # noqa: PLC0415

  gap = _entry("heldout/mlp − embed_2d", "all/mlp − embed_2d")
  arms = report._claim_arms(gap)
  assert arms == ["heldout/mlp", "heldout/embed_2d", "all/mlp", "all/embed_2d"]
  checked = dict.fromkeys(arms, True)
  assert claims.mark_settling([gap], checked, report._claim_arms)[0]["settled"]
  checked["heldout/embed_2d"] = False
  assert claims.mark_settling([gap], checked, report._claim_arms)[0]["settled"] is False
  tuned = {**gap, "tuned": "MLP swept"}  # read as tuned: marked by the tuned readings' check
  checked.update({arm + recipe.TUNED: True for arm in arms})
  assert claims.mark_settling([tuned], checked, report._claim_arms)[0]["settled"]
  assert claims.mark_settling([gap], checked, report._claim_arms)[0]["settled"] is False


def test_a_claim_read_as_tuned_takes_its_tuned_readings_verdict_where_they_were_checked():
  at_defaults, tuned = _entry("x", "y"), {**_entry("x", "y"), "tuned": "x swept"}
  plain = {"x": True, "y": False}  # a record whose length check read defaults only
  assert [c["settled"] for c in claims.mark_settling([at_defaults, tuned], plain)] == [False] * 2
  both = recipe.LengthRule(window=1, tolerance=5.0, higher_is_better=True).check(
    {"x": [[[0, 0.0], [1, 1.0]]], "y": [[[0, 0.0], [1, 9.0]]], "y (tuned)": [[[0, 0.0], [1, 2.0]]]}
  )  # fmt: skip
  assert both == {"x": True, "y": False, "x (tuned)": True, "y (tuned)": True}  # x: its defaults'
  marked = claims.mark_settling([at_defaults, tuned], both)
  assert [c["settled"] for c in marked] == [False, True]
  assert marked[0]["unsettled"] == ["y"]
  noted = {**at_defaults, "tuned": stats.AT_DEFAULTS + " (x's γ set by hand)"}  # still defaults
  assert claims.mark_settling([noted], both)[0]["unsettled"] == ["y"]
