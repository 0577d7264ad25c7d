"""`program.build`: one compiled train step serves every seed."""

import jax

from configs import vit_digits
from lfpe.train import program, sharding


def _lowered_text(seed: int, seeds: int = 0) -> tuple[str, program.Program]:
  config = vit_digits.get_config("posemb=fourier")
  with config.unlocked():
    config.seed, config.seeds, config.batch_size = seed, seeds, 8
    config.model.dropout = 0.1  # the dropout key reaches the step
  mesh = sharding.make_mesh(config.mesh, jax.devices()[:1])
  prog = program.build(config, mesh)
  return prog.train_step.lower(*prog.abstract_inputs(8)).as_text(), prog


def test_seeds_compile_to_one_program_their_dropout_key_an_argument():
  """The key is the step's argument (so XLA's persistent cache compiles one program for every
  seed of a record), and each seed's program is handed its own key."""
  text_0, prog_0 = _lowered_text(0)
  text_7, prog_7 = _lowered_text(7)
  assert text_0 == text_7
  assert (jax.random.key_data(prog_0.dropout_rng) != jax.random.key_data(prog_7.dropout_rng)).any()
  assert (
    jax.random.key_data(prog_7.dropout_rng) == jax.random.key_data(program.seed_keys(7)[1])
  ).all()
  text_a, prog_a = _lowered_text(0, seeds=2)
  text_b, _ = _lowered_text(5, seeds=2)
  assert text_a == text_b and prog_a.dropout_rng.shape == (2,)
