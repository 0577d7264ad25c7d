"""The benchmarks' FLOP count and trace reading, against hand-computed values; the NaFlex
benchmark's two layouts."""

import re

import pytest

from benchmarks import naflex, profile_step, train_step


def vit_train_flops(width: int, depth: int, batch: int, tokens: int = 197) -> float:
  """3x the forward matmul FLOPs of a ViT at 224x224 with 16x16 patches and 1000 classes."""
  block = tokens * (24 * width**2 + 4 * tokens * width)  # qkv, out, 4x MLP; q.k and a.v
  forward = depth * block + 2 * 196 * 768 * width + 2 * width * 1000
  return 3 * forward * batch


@pytest.mark.parametrize("batch", [1, 2])
def test_step_flops_matches_the_analytic_count(batch):
  flops = train_step.step_flops(train_step.vit_config("Ti/16", "embed_1d", batch))
  assert flops == pytest.approx(vit_train_flops(width=192, depth=12, batch=batch), rel=0.05)


def test_device_events_keep_the_accelerator_and_fall_back_to_xla_threads():
  meta = lambda kind, pid, name, tid=0: {
    "name": kind,
    "pid": pid,
    "tid": tid,
    "args": {"name": name},
  }
  op = lambda pid, tid, name: {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": 0, "dur": 1}
  host = [meta("process_name", 1, "/host:CPU"), meta("thread_name", 1, "tf_XLAEigen/1", 7)]
  events = [*host, op(1, 7, "fusion"), op(1, 8, "$python"), op(2, 0, "gemm")]
  gpu = {"traceEvents": [*events, meta("process_name", 2, "/device:GPU:0")]}
  assert [e["name"] for e in profile_step.device_events(gpu)] == ["gemm"]
  assert [e["name"] for e in profile_step.device_events({"traceEvents": events})] == ["fusion"]


def test_the_naflex_benchmark_runs_both_layouts(capsys):
  naflex.main(["--batch", "8", "--tokens", "32", "--width", "64", "--depth", "1"])
  out = capsys.readouterr().out
  assert "| packed (NaFlex, `resolution.pack`) | 32 |" in out
  assert "| padded to the largest size | 64 |" in out and "padded / packed step time" in out


def test_fusion_bodies_finds_the_hlo_of_a_traced_kernel():
  import jax
  import jax.numpy as jnp

  hlo = jax.jit(lambda x: jnp.tanh(x.T * 2.0).sum(0) + 1.0).lower(jnp.ones((8, 4))).compile()
  text = hlo.as_text()
  names = [profile_step._kernel_name(m) for m in re.findall(r"%?([\w.\-]+) = \S+ fusion\(", text)]
  assert names, text
  bodies = profile_step.fusion_bodies(text, names[:1])
  assert list(bodies) == names[:1] and "fusion(" in bodies[names[0]]
  assert len(bodies[names[0]].splitlines()) > 1  # the called computation's ops too
  assert profile_step.fusion_bodies(text, ["no_such_kernel"]) == {}
