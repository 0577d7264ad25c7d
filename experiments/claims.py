"""claims.json of a record and its verdict table in the record's README (one writer for all).

`write(entries, out)` adds each entry's Holm-adjusted verdict within the record (the
family: every claim of one claims.json, `stats.holm`), saves `out/claims.json` and, when
`out/README.md` has the markers `<!-- claims:start -->` and `<!-- claims:end -->`, replaces
what lies between them with `markdown(entries)`: the README's verdict sentences are generated,
never typed.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Collection

import numpy as np

from experiments import provenance, recipe, stats, sweeps


def markdown(entries: list[dict]) -> str:
  """The verdict table of claims.json (the entries' Holm verdicts, computed over `entries` as
  one family where they lack them)."""
  lines = [
    "| paper | item | claim | a − b (95 % CI) | paper's a − b | n | verdict | Holm | "
    "min. detectable | tuned |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  holm = [c.get("holm_verdict") for c in entries]
  if None in holm:  # a report's tables, drawn before `write` stores the family's verdicts
    holm = stats.holm(entries)
  for c, holm_verdict in zip(entries, holm, strict=True):
    detectable = c["minimum_detectable"]
    lines.append(
      f"| {c['paper']} | {c['item']}{' (table)' * (c.get('source') == 'table')} "
      f"| {c['claim']} | {interval(c)} {'paired' if c['paired'] else 'Welch'} "
      f"| {_paper(c)} | {c['n']} "
      f"| **{c['verdict']}**{_ceiling(c)}{margin_note(c)}{_settling(c)} "
      f"| {holm_verdict} "
      f"| {'n/a' if detectable is None else format(detectable, '.3g')} | {c.get('tuned', '?')} |"
    )
  return "\n".join(lines)


def power_markdown(entries: list[dict]) -> str:
  """The seeds each paired directional claim would need, from its measured paired sd
  (`stats.paired_sd`): the seeds a paired test needs to find a true difference of a tenth of
  the control gap on the claim's metric (80 % power, 5 % two-sided; `stats.seeds_needed`),
  the smallest difference a record calls meaningful (the equivalence margin's rule,
  `stats.equivalence_margin`); the first control row on a metric sets its target. Claims on
  a metric with no control row are left out."""
  lines = []
  controls: dict[str, dict] = {}
  for c in entries:
    if c["item"] == "control":
      controls.setdefault(c["metric"], c)
  for control in controls.values():
    target = stats.equivalence_margin(control["difference"])
    rows = [
      c for c in entries
      if c["metric"] == control["metric"] and c["item"] != "control" and c["paired"]
      and c.get("direction", 1) != 0 and c["n"] >= 2
    ]  # fmt: skip
    if not rows:
      continue
    lines += [
      f"On {control['metric']}: seeds for a true difference of {target:.3g}, a tenth of the "
      f"control gap {abs(control['difference']):.3g} (80 % power, paired):",
      "",
      "| claim | n | paired sd | detectable now | seeds needed | verdict |",
      "|---|---|---|---|---|---|",
    ]
    for c in rows:
      sd, detectable = stats.paired_sd(c), c["minimum_detectable"]
      lines.append(
        f"| {c['claim']} | {c['n']} | {sd:.3g} | "
        f"{'n/a' if detectable is None else format(detectable, '.3g')} | "
        f"{stats.seeds_text(sd, target)} | {c['verdict']} |"
      )
    lines.append("")
  return "\n".join(lines)


def rereads_markdown(claims_of: Callable[[dict], list[dict]], results: dict) -> list[str]:
  """The claims read again on fewer seeds, as lines of tables.md: without the seeds the sweep
  trained too (`unfitted_markdown`), and without the seeds whose record runs span CPUs
  (`machines_markdown`)."""
  return unfitted_markdown(claims_of, results) + machines_markdown(claims_of, results)


def unfitted_markdown(claims_of: Callable[[dict], list[dict]], results: dict) -> list[str]:
  """Each tuned claim over all seeds and over the record seeds its sweep did not train, as
  lines of tables.md (none where the sweep's seeds are apart, `sweeps.shared_seeds`). A sweep
  that trained seeds 0, ..., k - 1 chose each knob value on runs that share their
  initialisation and batch order with the record's seeds 0, ..., k - 1 (`sweeps.unfitted`);
  where the later seeds alone keep each resolved difference's sign, that sharing did not make
  the verdict. Fewer seeds: read sign and size, not verdict."""
  sweep_seeds = sweeps.shared_seeds(results)
  if not sweep_seeds:
    return []
  tuned = lambda entries: {c["claim"]: c for c in entries if not c["tuned"].startswith("none")}
  every, later = tuned(claims_of(results)), tuned(claims_of(sweeps.unfitted(results, sweep_seeds)))
  summary, table = _reread(every, later, f"seeds ≥ {sweep_seeds}", "later")
  return [
    f"## Tuned claims on the seeds the sweep did not train (seeds {sweep_seeds} on)",
    "",
    f"The sweep trained seeds 0-{sweep_seeds - 1}, as the record's first seeds are: each "
    f"tuned claim again without those record seeds. {summary}",
    "",
    *table,
  ]


UNSTAMPED = "no stamp of its own"  # a run recorded before runs kept their own provenance


def _cpu_groups(by_cpu: Counter) -> dict:
  """{stamped `provenance.run_cpu`: its group, 0, 1, ...}: runs of one group trained on one
  CPU. A stamp with its extensions is a group of its own; one without them (before
  2026-12-05) joins the group of its name where exactly one such stamp has them, else is a
  group of its own (matching several, it could be any: `provenance.same_cpu`)."""
  stamped = sorted((cpu for cpu in by_cpu if cpu), key=_label)
  full = [cpu for cpu in stamped if cpu[1]]
  matches = {cpu: [c for c in full if provenance.same_cpu(cpu, c)] for cpu in stamped if not cpu[1]}
  heads = full + [cpu for cpu, found in matches.items() if len(found) != 1]
  group = {cpu: i for i, cpu in enumerate(sorted(heads, key=_label))}
  for cpu, found in matches.items():
    if cpu not in group:  # no extensions, one stamp of its name with them
      group[cpu] = group[found[0]]
  return group


def _label(cpu) -> str:
  if not cpu:
    return UNSTAMPED
  name, isa = cpu
  return name + (f" ({', '.join(isa)})" if isa else "")


SPLIT = 10**6  # a split seed's runs on its group-g CPU read as seed g * SPLIT + seed


def machines_markdown(claims_of: Callable[[dict], list[dict]], results: dict) -> list[str]:
  """Where each seed's record runs trained (`provenance.run_cpu`), as lines of tables.md, and
  where a seed's runs span CPUs (`_cpu_groups`), each claim again with the pairs across CPUs
  left out (`_split_by_cpu`). Another CPU runs other machine code (vector width, fused
  multiply-adds, the order of a sum), so one run on two CPUs takes two trajectories: the
  arms of a seed on two CPUs still share its initialisation and batch order, not its
  arithmetic. Only stamped runs decide which seeds span CPUs (an unstamped run is counted,
  and stays with its seed's first CPU). None where no run has its own stamp (records before
  2026-11-27)."""
  cpus: dict[int, Counter] = {}
  for key, entry in results.items():
    if (seed := sweeps.record_seed(key)) is not None:
      cpus.setdefault(seed, Counter())[provenance.run_cpu(entry)] += 1
  if all(set(by_cpu) == {None} for by_cpu in cpus.values()):
    return []
  groups = {seed: _cpu_groups(by_cpu) for seed, by_cpu in cpus.items()}
  mixed = [seed for seed, group in sorted(groups.items()) if len(set(group.values())) > 1]
  unstamped = sum(by_cpu[None] for by_cpu in cpus.values())
  lines = ["## Where each seed trained", "", "| seed | record runs by CPU |", "|---|---|"]
  for seed, by_cpu in sorted(cpus.items()):
    counts = sorted((_label(cpu), n) for cpu, n in by_cpu.items())
    lines.append(f"| {seed} | {', '.join(f'{label}: {n}' for label, n in counts)} |")
  one, many = "run predates the per-run stamp", "runs predate the per-run stamp"
  note = [
    f"{unstamped} {one if unstamped == 1 else many} (2026-11-27): where "
    f"{'it' if unstamped == 1 else 'they'} trained is not recorded."
  ] * bool(unstamped)
  by_name = sum(  # runs whose bare name a seed-mate's stamp with extensions shares
    n
    for by_cpu in cpus.values()
    for cpu, n in by_cpu.items()
    if cpu and not cpu[1] and any(c and c[1] and c[0] == cpu[0] for c in by_cpu)
  )
  note += [
    f"{by_name} {'run' if by_name == 1 else 'runs'} stamped before 2026-12-05 "
    f"{'names its CPU' if by_name == 1 else 'name their CPU'} without its instruction-set "
    "extensions, matched to a stamp that has them by the name alone (two hosts of one name "
    "may compile other code)."
  ] * bool(by_name)
  if not mixed:
    told = ", as far as their stamps tell" * bool(by_name)
    note.insert(0, f"Each seed's {'stamped ' * bool(unstamped)}runs trained on one CPU{told}.")
    return [*lines, "", " ".join(note), ""]
  every = {c["claim"]: c for c in claims_of(results)}
  split = {c["claim"]: c for c in claims_of(_split_by_cpu(results, groups))}
  summary, table = _reread(every, split, "pairs on one CPU", "such")
  one = len(mixed) == 1
  note.insert(
    0,
    f"{'Seed' if one else 'Seeds'} {', '.join(map(str, mixed))} trained on more than one CPU, "
    f"so some of {'its' if one else 'their'} paired differences may compare runs of two CPUs "
    "(another trajectory from the same initialisation and batches). Each claim again with "
    f"the runs of {'that seed' if one else 'such a seed'} on each CPU read as a seed of their "
    f"own, so that a pair across CPUs is left out and a pair on one CPU stays. {summary}",
  )
  return [*lines, "", " ".join(note), "", *table]


def _split_by_cpu(results: dict, groups: dict[int, dict]) -> dict:
  """`results` with each record run of a seed `s` on its group-`g` CPU (`_cpu_groups`, g > 0)
  read as seed `g * SPLIT + s` (its key's last part and its entry's `seed`): arms pair on a
  seed they share (`stats.seed_paired`), so a pair across CPUs no longer pairs and a pair on
  one CPU still does. An unstamped run keeps its seed."""
  out = {}
  for key, entry in results.items():
    seed = sweeps.record_seed(key)
    g = groups.get(seed, {}).get(provenance.run_cpu(entry), 0) if seed is not None else 0
    if g:
      key, entry = (
        f"{key.rsplit('/', 1)[0]}/{g * SPLIT + seed}",
        {**entry, "seed": g * SPLIT + seed},
      )
    out[key] = entry
  return out


def _reread(
  every: dict[str, dict], again: dict[str, dict], label: str, kind: str
) -> tuple[str, list[str]]:
  """A sentence and a table: each claim of `every` beside the same claim read on fewer seeds,
  the `kind` of seeds left (`again`; `_same_claims`), or "< 2" where under two are left."""
  again = {text: d for text, d in again.items() if min(np.atleast_1d(d["n"])) >= 2}
  rows = list(_same_claims(every, again))
  resolved = [(c, d) for c, d in rows if c["verdict"] != "unresolved"]
  reread = [(c, d) for c, d in resolved if d]
  kept = sum(np.sign(c["difference"]) == np.sign(d["difference"]) for c, d in reread)
  summary = (
    f"Of the {len(resolved)} resolved over all seeds, {len(reread)} have two {kind} seeds or "
    f"more and {kept} of those keep their sign."
  )
  table = [
    f"| claim | a − b, all seeds | n | a − b, {label} | n | verdict there |",
    "|---|---|---|---|---|---|",
  ]
  arms = lambda x: (x.get("a"), x.get("b"))  # noqa: E731
  for c, d in rows:
    there = "– | < 2 | –"
    if d:
      other = f" ({d['a']} − {d['b']} there)" if arms(d) != arms(c) else ""
      there = f"{interval(d)} | {d['n']} | {d['verdict']}{other}"
    table.append(f"| {c['claim']} | {interval(c)} | {c['n']} | {there} |")
  return summary, [*table, ""]


def _same_claims(every: dict[str, dict], again: dict[str, dict]):
  """(claim, the same claim in `again` or None) for each of `every`: by its text, else by its
  paper, item, metric and reading where exactly one claim of each side has them (a control
  names the best arm, which fewer seeds may change)."""
  key = lambda c: (c.get("paper"), c.get("item"), c.get("metric"), c.get("tuned", "")[:4] == "none")
  left = {t: c for t, c in again.items() if t not in every}
  unique = lambda claims: {
    k: c for k, c in ((key(c), c) for c in claims) if [key(o) for o in claims].count(k) == 1
  }
  by_key = unique(list(left.values()))
  missing = unique([c for t, c in every.items() if t not in again])
  for text, c in every.items():
    d = again.get(text)
    if d is None and missing.get(key(c)) is c:
      d = by_key.get(key(c))
    yield c, d


def interval(c: dict) -> str:
  """A claim's a − b and 95 % interval, as every table prints it."""
  return stats.signed_interval(c["difference"], c["ci_low"], c["ci_high"])


def _ceiling(c: dict) -> str:
  """Why a verdict reads as it does at the metric's ceiling."""
  if c.get("failing_arm_at_ceiling"):
    return " (the arm the paper says fails is at ceiling)"
  return " (both at ceiling)" if c.get("at_ceiling") else ""


def margin_note(c: dict) -> str:
  """An equivalence claim's margin, a tenth of its control gap (`stats.equivalence_margin`),
  and a directional claim's interval inside that margin (`inside_margin`)."""
  why = f"±{c.get('margin', 0):.3g}: a tenth of the control gap {c.get('control_gap', 0):.3g}"
  if c.get("direction", 1) == 0:
    return f" (within {why})"
  return f" (inside the about-equal margin {why})" if c.get("inside_margin") else ""


def _settling(c: dict) -> str:
  """Which of a claim's arms failed its record's length rule, or went unchecked
  (`mark_settling`)."""
  if c.get("settled") is False:
    return f" (read before {', '.join(c['unsettled'])} settled: the length rule)"
  if c.get("settled", True) is None:
    return f" (length not checked for {', '.join(c['unchecked'])})"
  return ""


def mark_settling(
  entries: list[dict],
  checked: dict[str, bool | None] | None,
  arms: Callable[[dict], Collection[str]] = lambda c: (c["a"], c["b"]),
) -> list[dict]:
  """`entries` with `settled` added from the record's length check (`checked`: each arm's
  `recipe.LengthRule.check` verdict): False where any of the claim's `arms(entry)` failed the
  rule (listed in `unsettled`: the verdict is read before they settled), None where one has
  no readable check and none failed (listed in `unchecked`), True where all settled. A claim
  read as tuned (its `tuned` not `stats.AT_DEFAULTS`, with or without a note after it) reads
  its arms' tuned readings where the check has them (`recipe.TUNED` keys). `checked` None (a
  record that checked no length) returns `entries` unchanged."""
  if checked is None:
    return entries
  out = []
  for c in entries:
    read, suffix = recipe.reading(checked, not c["tuned"].startswith(stats.AT_DEFAULTS))
    found = {arm + suffix: read.get(arm) for arm in arms(c)}
    late = sorted(arm for arm, ok in found.items() if ok is False)
    unknown = sorted(arm for arm, ok in found.items() if ok is None)
    settled = False if late else (None if unknown else True)
    lists = {"unsettled": late} if late else ({"unchecked": unknown} if unknown else {})
    out.append({**c, "settled": settled, **lists})
  return out


def _paper(c: dict) -> str:
  """The paper's own a − b and the measured difference as a multiple of it."""
  if c.get("paper_value") is None:
    return "–"
  ratio = c.get("ratio_to_paper")
  return f"{c['paper_value']:+.3g}" + (f" (x{ratio:.3g})" if ratio is not None else "")


def replace_block(doc: str, name: str, text: str) -> str:
  """`doc` with the block between `<!-- name:start -->` and `<!-- name:end -->` set to text."""
  start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
  if start not in doc or end not in doc:
    return doc
  head, rest = doc.split(start, 1)
  return f"{head}{start}\n{text}{end}{rest.split(end, 1)[1]}"


def update_readme(out: str, blocks: dict[str, str]) -> None:
  """Replaces each named block of `out/README.md` (if the README and its markers exist)."""
  readme = os.path.join(out, "README.md")
  if not os.path.exists(readme):
    return
  with open(readme) as f:
    doc = f.read()
  for name, text in blocks.items():
    doc = replace_block(doc, name, text)
  with open(readme, "w") as f:
    f.write(doc)


def write(entries: list[dict], out: str) -> None:
  """`out/claims.json` (with each entry's Holm verdict in this family), and the README's
  `claims` block generated from it."""
  entries = [{**e, "holm_verdict": h} for e, h in zip(entries, stats.holm(entries), strict=True)]
  with open(os.path.join(out, "claims.json"), "w") as f:
    json.dump(entries, f, indent=1)
  update_readme(out, {"claims": markdown(entries) + "\n"})
