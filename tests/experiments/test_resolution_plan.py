"""The resolution benchmark's wiring (second edition): each arm's config carries its training
choices, its knob value, and evaluations that redraw the test scenes at every size under each
policy (no training here)."""

import argparse

import pytest

from experiments import sweeps
from experiments.resolution import comparisons, plan, run
from lfpe import encodings
from lfpe.data import shape_layout
from lfpe.encodings import coords, rotary
from lfpe.tasks import classification

ARMS = plan.by_slug()
ARGS = argparse.Namespace(quick=False, steps=plan.STEPS)


def _config(slug: str, value=None, *, sweep=False):
  return run.load_config(ARMS[slug], 1, ARGS, value, sweep=sweep)


def _tests(slug: str, config) -> dict:
  """The named evaluations that test a record run of `slug` once trained (`run.score`)."""
  return plan.evals(ARMS[slug], config.model.posemb, plan.TEST_SIZES, config.data.name)


def test_sizes_aligned_and_not():
  for size in plan.ALIGNED:  # test patches nest in training patches, or hold whole ones
    ratio = size / plan.TRAIN_SIZE
    assert ratio.is_integer() or (1 / ratio).is_integer()
  for size in plan.UNALIGNED:
    ratio = size / plan.TRAIN_SIZE
    assert not ratio.is_integer() and not (1 / ratio).is_integer()
  assert 144 in plan.UNALIGNED and set(plan.CLAIM_SIZES) <= set(plan.ALIGNED)  # 2.25x; 2x, 3x
  assert all(size % plan.PATCH == 0 for size in plan.TEST_SIZES)


def test_training_choices_reach_the_config():
  config = _config("rope_axial-dinov3")
  assert encodings.parse(config.model.posemb) == ("rope_axial", {"coords_mode": "dinov3"})
  assert dict(config.model.coord_augment) == coords.DINOV3  # DINOv3's released preset
  ablated = _config("rope_axial-dinov3-coords")  # its coordinates, without the augmentation
  assert encodings.parse(ablated.model.posemb) == encodings.parse(config.model.posemb)
  assert not ablated.model.get("coord_augment")
  assert _config("rope_mixed-mixed-res").data.train_sizes == plan.MIXED
  assert _config("rope_mixed").data.get("train_sizes") is None
  assert encodings.parse(_config("fourier").model.posemb)[1]["coords_mode"] == "index"
  config = _config("sine_2d")
  assert (config.seed, config.total_steps, config.schedule.warmup_steps) == (1, 1000, 100)
  assert config.model.width // config.model.num_heads >= 32 and 2 <= config.model.depth <= 4


def test_a_sweep_run_trains_and_scores_on_validation_at_its_knob_value():
  config = _config("rope_axial", 400.0, sweep=True)
  assert encodings.knob(config.model.posemb) == ("theta", 400.0)
  assert config.data.train_split == f"train[{plan.VALIDATION}:]"
  assert config.data.eval_split == f"train[:{plan.VALIDATION}]"  # never the test split
  assert not config.evals
  tuned = _config("rope_axial", 400.0)  # the record run at the chosen value: every test size
  assert encodings.knob(tuned.model.posemb) == ("theta", 400.0) and not tuned.evals
  tests = _tests("rope_axial", tuned)  # run once it is trained
  assert tests and all(
    encodings.knob(e["model"]["posemb"]) == ("theta", 400.0) for e in tests.values()
  )


@pytest.mark.parametrize("slug", sorted(ARMS))
def test_every_policy_of_every_arm_builds_a_model(slug):
  """Each test-time policy is a valid set of options of the arm's encoding (checked when the
  model is built, as the trainer builds each named evaluation's model)."""
  config = _config(slug)
  task = classification.Classification()
  for evaluation in _tests(slug, config).values():
    variant = config.copy_and_resolve_references()
    with variant.unlocked():
      variant.model.posemb = evaluation["model"]["posemb"]
      variant.data.image_size = evaluation["data"]["image_size"]
    task.create_model(variant).check()
  if encodings.knob(config.model.posemb):  # every arm but the control has a knob to sweep
    assert len(sweeps.grid(config.model.posemb)) == sweeps.VALUES
  else:
    assert slug == "none"


def test_each_policy_and_size_is_a_named_evaluation_of_the_scenes_drawn_at_that_size():
  tests = _tests("rope_axial", _config("rope_axial"))
  others = [s for s in plan.TEST_SIZES if s != plan.TRAIN_SIZE]  # 64 px: the trainer's eval
  larger = [s for s in others if s > plan.TRAIN_SIZE]
  want = {plan.eval_name("extrapolate", s) for s in others}
  want |= {plan.eval_name(p, s) for p in ("pi", "ntk", "yarn") for s in larger}
  assert set(tests) == want
  ntk = tests[plan.eval_name("ntk", 144)]
  assert ntk["data"]["image_size"] == 144 and ntk["data"]["name"] == "shape_layout/colour_test_144"
  assert set(plan.TEST_SIZES) - {plan.TRAIN_SIZE} == set(shape_layout.TEST_SIZES)  # all stored
  assert encodings.parse(ntk["model"]["posemb"]) == ("rope_axial", {"scaling": "ntk"})
  table = _tests("embed_1d", _config("embed_1d"))[plan.eval_name("bicubic_pytorch", 128)]
  assert encodings.parse(table["model"]["posemb"])[1]["resample_method"] == "bicubic_pytorch"


def test_pi_of_the_mixed_resolution_arm_takes_its_largest_trained_grid():
  """Trained at 48-96 px, its positions ran to 12x12: PI is the identity up to 96 px and
  interpolates into 12x12 beyond, where the single-size arm's PI takes its 8x8."""
  sizes = (96, 128)
  mixed = _tests("rope_mixed-mixed-res", _config("rope_mixed-mixed-res"))
  single = _tests("rope_mixed", _config("rope_mixed"))
  model = lambda tests, size: encodings.build(
    tests[plan.eval_name("pi", size)]["model"]["posemb"],
    dim=64,
    grid_shape=(8, 8),
    num_heads=2,
    head_dim=32,
    ndim=2,
  )
  assert [model(mixed, s).training_length for s in sizes] == [(12, 12)] * 2
  assert model(single, 128).training_length == (8, 8)
  grid = lambda s: (s // plan.PATCH,) * 2
  assert float(model(mixed, 96).grid_coords(grid(96)).max()) == 11.0  # a trained size: as is
  assert float(model(mixed, 128).grid_coords(grid(128)).max()) == 12 - 12 / 16


def test_score_reads_every_policy_and_size_a_trainer_tested():
  config = _config("rope_mixed")  # a run recorded when the trainer ran the tests
  summary = {"eval": {"accuracy": 0.9}, "wall_s": 70.0}
  summary |= {f"eval/{name}": {"accuracy": 0.5} for name in _tests("rope_mixed", config)}
  entry = run.score(run.runs.Run("rope_mixed/1", config, "/nonexistent"), summary)
  assert set(entry["scores"]) == {"extrapolate", "pi"}
  scored = lambda sizes: {str(s): 0.9 if s == plan.TRAIN_SIZE else 0.5 for s in sizes}
  assert entry["scores"]["extrapolate"] == scored(plan.TEST_SIZES)
  assert entry["scores"]["pi"] == scored(s for s in plan.TEST_SIZES if s >= plan.TRAIN_SIZE)
  assert entry["seconds"] == 70.0 and entry["arm"] == "rope_mixed" and entry["seed"] == 1


def test_a_killed_test_resumes_at_the_first_size_it_had_not_finished(tmp_path, monkeypatch):
  config = _config("rope_mixed")
  record = run.runs.Run("rope_mixed/1", config, str(tmp_path))
  tested = []

  def evaluate_all(config, workdir, main):  # a fake trained run: accuracy = size / 1000
    assert workdir == str(tmp_path) and not main and not config.get("seeds")
    assert config.eval_batch_size == plan.TEST_BATCH  # cache-sized test batches
    sizes = {plan.policy_and_size(name)[1] for name in config.evals}
    assert len(sizes) == 1  # one size at a time, all its policies in one pass
    if sizes == {"192"} and not tested[-1:] == ["retry"]:
      raise KeyboardInterrupt  # killed while testing the largest size
    tested.append(sizes.pop())
    return {f"eval/{n}": {"accuracy": int(plan.policy_and_size(n)[1]) / 1000} for n in config.evals}

  monkeypatch.setattr(run.trainer, "evaluate_all", evaluate_all)
  summary = {"eval": {"accuracy": 0.9}, "wall_s": 70.0}
  with pytest.raises(KeyboardInterrupt):
    run.score(record, summary)
  assert tested == ["32", "48", "96", "128", "144"]  # each one kept in the workdir
  tested.append("retry")
  entry = run.score(record, summary)  # the re-run tests only what was left
  assert tested[-1] == "192" and tested.count("32") == 1
  assert entry["scores"]["pi"] == {"64": 0.9, "96": 0.096, "128": 0.128, "144": 0.144, "192": 0.192}
  assert entry["scores"]["extrapolate"]["32"] == 0.032
  again = run.score(record, {}, entry)  # a finished entry re-scored: nothing runs
  assert again == entry and tested[-1] == "192"


def test_rows_read_off_a_figure_or_table_name_published_items():
  """`READ_OFF` names items of `PUBLISHED` (a typo would leave a row marked 'text')."""
  items = {item for _, item, *_ in comparisons.PUBLISHED}
  assert set(comparisons.READ_OFF) <= items
  assert {"Heo et al. 2024, Fig. 3", comparisons.TABLE_2} == set(comparisons.READ_OFF)
  assert comparisons.TABLE_2.startswith("Table 2 (unseen sizes, raw positions")


def test_every_compared_cell_is_an_arm_and_a_policy_the_plan_tests():
  """Each (arm, policy) of `PUBLISHED` is planned (a typo would leave a claim with no runs)."""
  policies = {a.name: set(a.policies) for a in plan.arms()}
  for *_, text, a, b in comparisons.PUBLISHED:
    for arm, policy in (a, b):
      assert arm in policies and policy in policies[arm], (text, arm, policy)


def test_dinov3_is_credited_only_with_what_it_states():
  """DINOv3 gives its box jittering as what adapts RoPE to resolution; it compares nothing with
  RoPE on indices, so the recipe against indices and its coordinates alone are lfpe's rows
  (the recipe's row, carried by the coordinates, was credited to DINOv3 while its own claim,
  the augmentation, was lfpe's)."""
  papers = {text: paper for paper, _, text, *_ in comparisons.PUBLISHED}
  dinov3 = [text for text, paper in papers.items() if paper == "DINOv3"]
  assert dinov3 == ["DINOv3's coordinate augmentation helps on top of its normalised coordinates"]
  recipe = "DINOv3's RoPE recipe holds up at other sizes better than RoPE-Axial on indices"
  assert papers[recipe] == "lfpe"


def test_the_yarn_row_says_it_is_pi_with_the_temperature_at_this_grid():
  """On the record's 8 patches a side YaRN's ramp keeps no pair (every γ under 0.01, for any
  θ its sweep may choose): the row tests PI plus the temperature, and its text says so."""
  side = plan.TRAIN_SIZE // plan.PATCH
  for theta in (6.25, 100.0, 10_000.0):
    assert float(rotary.yarn_kept(32, theta, side, 1, 32).max()) < 0.01
  (text,) = [t for _, _, t, a, _ in comparisons.PUBLISHED if a == ("rope_axial", "yarn")]
  assert "PI on every pair" in text


def test_every_arm_has_a_label_without_commas_for_the_answer_page():
  """docs/which_encoding.md names the record's cells in words and lists them by commas."""
  from experiments.encoding_families import FAMILIES  # noqa: PLC0415

  for arm in plan.arms():
    assert arm.name in plan.ARM_LABELS and "," not in plan.ARM_LABELS[arm.name], arm.name
    for policy in arm.policies:  # the page has a row per (arm, policy)
      assert policy in plan.POLICY_LABELS and "," not in plan.POLICY_LABELS[policy], policy
  family = next(f for f in FAMILIES if f.record == "resolution")
  assert family.label(family.reference) == "Sine-2D (extrapolated)"
  assert family.label("embed_1d / bicubic_pytorch") == "2-D table (APE) (PyTorch bicubic)"
  assert family.label("rope_axial / pi") == "RoPE-Axial (position interpolation)"
