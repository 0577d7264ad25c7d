"""Reference values computed by the reference code itself, for
tests/encodings/test_reference_values.py (which needs neither torch nor the references).

  python3.11 -m venv /tmp/ref && /tmp/ref/bin/pip install torch==2.13.0 rotary-embedding-torch
  /tmp/ref/bin/python scripts/reference_values.py --rope-vit ROPE_VIT --dinov3 DINOV3 \
    --swin SWIN --detr DETR --mae MAE --big-vision BIG_VISION

Each path is a checkout of the reference (naver-ai/rope-vit, facebookresearch/dinov3,
microsoft/Swin-Transformer, facebookresearch/detr, facebookresearch/mae,
google-research/big_vision): its functions and classes run from there, read out of their
files and run alone where a module's other imports (timm, flax, its own utilities) are not
installed; nothing of them is copied here. Writes
tests/encodings/reference_values.npz: each case's inputs and the reference's outputs
(computed in float64 where the reference allows it, stored as float32), and under `cases` a
JSON list of what each case is, which the test reads.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import json
import math
import pathlib
import subprocess
import types

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 (PyTorch's own spelling)
from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

REFERENCES = {  # flag: (repository, the file its code is read from)
  "rope-vit": ("naver-ai/rope-vit", "deit/models_v2_rope.py"),
  "dinov3": ("facebookresearch/dinov3", "dinov3/layers"),
  "swin": ("microsoft/Swin-Transformer", "models/swin_transformer.py"),
  "detr": ("facebookresearch/detr", "models/position_encoding.py"),
  "mae": ("facebookresearch/mae", "util/pos_embed.py"),
  "big-vision": ("google-research/big_vision", "big_vision/models/vit.py"),
}
OUT = pathlib.Path(__file__).resolve().parents[1] / "tests/encodings/reference_values.npz"
RESIZES = [  # (lfpe method, lfpe antialias, lfpe align_corners, torch mode, torch antialias)
  ("bicubic_pytorch", None, False, "bicubic", False),  # Swin, MAE, DeiT, RoPE-ViT's APE
  ("bicubic_pytorch", None, True, "bicubic", False),
  ("bicubic", None, False, "bicubic", True),  # timm's resample_abs_pos_embed
  ("bilinear", None, False, "bilinear", True),
  ("bilinear", False, False, "bilinear", False),
  ("bilinear", False, True, "bilinear", False),
]
GRIDS = [((5, 7), (9, 12)), ((9, 12), (5, 7))]  # up, down
SWIN = ((13, 13), (23, 23))  # a window-7 relative-bias table resized for window 12, Swin's kernel


class Float32Inputs:
  """`normal(size=...)`: float64 arrays of float32 values, so that inputs stored as float32
  are the inputs the reference computed on."""

  def __init__(self, seed: int):
    self._rng = np.random.default_rng(seed)

  def normal(self, size) -> np.ndarray:
    return self._rng.normal(size=size).astype(np.float32).astype(np.float64)


def functions(path: pathlib.Path, names: set[str], namespace: dict, kind=ast.FunctionDef) -> dict:
  """The top-level functions (or classes) `names` of the Python file `path`, defined in
  `namespace` (its other imports are not run)."""
  tree = ast.parse(path.read_text())
  body = [node for node in tree.body if isinstance(node, kind) and node.name in names]
  exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
  return {name: namespace[name] for name in names}


def classes(path: pathlib.Path, names: set[str], namespace: dict) -> dict:
  return functions(path, names, namespace, kind=ast.ClassDef)


def resizes(rng, arrays: dict, cases: list) -> None:
  """PyTorch's F.interpolate of a table `[H*W, C]` (with a class-token row for lfpe)."""
  for method, antialias, corners, mode, torch_aa in RESIZES:
    swin = [SWIN] if (method, corners) == ("bicubic_pytorch", False) else []
    for old, new in GRIDS + swin:
      name = f"resize/{method}/aa={antialias}/corners={corners}/{old}->{new}"
      table = rng.normal(size=(1 + old[0] * old[1], 2))
      image = torch.tensor(table[1:]).reshape(1, *old, 2).permute(0, 3, 1, 2)
      out = F.interpolate(image, size=new, mode=mode, align_corners=corners, antialias=torch_aa)
      arrays[f"{name}/table"] = table
      arrays[f"{name}/out"] = out.permute(0, 2, 3, 1).reshape(-1, 2).numpy()
      cases.append(dict(name=name, kind="resize", method=method, antialias=antialias,
                        align_corners=corners, old=old, new=new))  # fmt: skip


def rope_vit(path: pathlib.Path, rng, arrays: dict, cases: list) -> None:
  """rope-vit's `compute_axial_cis` / `compute_mixed_cis` and `apply_rotary_emb` on q
  `[B, heads, N, d]` at a training grid and a larger one (its extrapolation)."""
  names = {"init_random_2d_freqs", "compute_mixed_cis", "compute_axial_cis", "init_t_xy",
           "reshape_for_broadcast", "apply_rotary_emb"}  # fmt: skip
  ref = functions(path, names, {"torch": torch, "Tuple": tuple})
  heads, d = 2, 16
  torch.manual_seed(0)
  init = ref["init_random_2d_freqs"]
  mixed = init(dim=d, num_heads=heads, theta=10.0).double()  # [2 (x, y), heads, d/2]
  for h, w in ((3, 5), (6, 10)):
    q = rng.normal(size=(1, heads, h * w, d))
    t_x, t_y = ref["init_t_xy"](end_x=w, end_y=h)
    axial = ref["compute_axial_cis"](dim=d, end_x=w, end_y=h, theta=100.0)
    mixed_cis = ref["compute_mixed_cis"](mixed.view(2, 1, -1), t_x.double(), t_y.double(), heads)[0]
    for mode, cis in (("axial", axial), ("mixed", mixed_cis)):
      name = f"rope_vit/{mode}/{h}x{w}"
      out, _ = ref["apply_rotary_emb"](torch.tensor(q), torch.tensor(q), cis)
      arrays[f"{name}/q"], arrays[f"{name}/out"] = q, out.double().numpy()
      cases.append(dict(name=name, kind="rope_vit", mode=mode, grid=(h, w), heads=heads, d=d))
  arrays["rope_vit/mixed_freqs"] = mixed.numpy()


def rotary_embedding_torch(rng, arrays: dict, cases: list) -> None:
  """rotary-embedding-torch per axis (a `RotaryEmbedding` of d/2 channels for y, one for x,
  their frequencies side by side as its `get_axial_freqs` places them) at an 8x12 grid of a
  model trained at 4x4: position interpolation (`interpolate_factor`, through its
  `get_seq_pos`) and NTK (`theta_rescale_factor`)."""
  d, train, grid = 16, (4, 4), (8, 12)
  x = rng.normal(size=(grid[0] * grid[1], d))
  for policy in ("pi", "ntk"):
    axes = []
    for n, n_train in zip(grid, train, strict=True):
      factor = max(n / n_train, 1.0)
      option = "interpolate_factor" if policy == "pi" else "theta_rescale_factor"
      rotary = RotaryEmbedding(dim=d // 2, theta=100.0, **{option: factor}).double()
      axes.append(rotary(rotary.get_seq_pos(n, dtype=torch.float64), seq_len=n))
    freqs = torch.cat(torch.broadcast_tensors(axes[0][:, None], axes[1][None, :]), dim=-1)
    out = apply_rotary_emb(freqs.reshape(-1, d), torch.tensor(x))
    name = f"rotary_embedding_torch/{policy}"
    arrays[f"{name}/x"], arrays[f"{name}/out"] = x, out.numpy()
    cases.append(dict(name=name, kind="rotary_embedding_torch", policy=policy, train=train,
                      grid=grid, d=d))  # fmt: skip


def dinov3(layers: pathlib.Path, rng, arrays: dict, cases: list) -> None:
  """DINOv3's `RopePositionEmbedding` (separate normalisation, base 100) and `rope_apply`, at
  evaluation and training with its coordinate augmentation: the released preset (rescale 2)
  and all three (shift, jitter, rescale); the uniform draws it made, and the bounds it drew
  them in, are kept for the test."""
  namespace: dict = {}
  exec(compile((layers / "rope_position_encoding.py").read_text(), "rope", "exec"), namespace)  # noqa: S102
  apply = functions(layers / "attention.py", {"rope_rotate_half", "rope_apply"}, {"torch": torch})
  heads, d = 1, 16
  augments = {
    "eval": {},
    "released": {"rescale_coords": 2.0},
    "all": {"shift_coords": 0.1, "jitter_coords": 1.1, "rescale_coords": 1.25},
  }
  drawn: list[tuple[float, float, torch.Tensor]] = []
  uniform = torch.Tensor.uniform_

  def recording(self, low, high):
    out = uniform(self, low, high)
    drawn.append((low, high, out.clone()))
    return out

  torch.Tensor.uniform_ = recording
  try:
    for label, options in augments.items():
      for h, w in ((3, 5), (6, 10)):
        rope = namespace["RopePositionEmbedding"](
          embed_dim=heads * d, num_heads=heads, base=100.0, dtype=torch.float64, **options
        )
        rope.train(label != "eval")
        torch.manual_seed(h * w)
        drawn.clear()
        sin, cos = rope(H=h, W=w)
        x = rng.normal(size=(h * w, d))
        name = f"dinov3/{label}/{h}x{w}"
        arrays[f"{name}/x"] = x
        arrays[f"{name}/out"] = apply["rope_apply"](torch.tensor(x), sin, cos).numpy()
        arrays[f"{name}/draws"] = np.concatenate([t.numpy().ravel() for *_, t in drawn] or [[]])
        bounds = [(low, high, t.numel()) for low, high, t in drawn]
        arrays[f"{name}/bounds"] = np.array(bounds, np.float64).reshape(-1, 3)
        cases.append(dict(name=name, kind="dinov3", grid=(h, w), d=d, options=options))
  finally:
    torch.Tensor.uniform_ = uniform


def _commit(path: pathlib.Path, given: str | None) -> str:
  """The reference checkout's commit: `given`, else git's."""
  if given:
    return given
  found = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True)
  return found.stdout.decode().strip() if found.returncode == 0 else "unknown"


def swin(path: pathlib.Path, rng, arrays: dict, cases: list) -> None:
  """Swin's `WindowAttention` relative position bias (its index buffer over its table) for a
  4x4 window, and for a 6x6 window fine-tuned from it with the table resized as Swin's
  `load_pretrained` does (`F.interpolate(mode='bicubic')` of the table as an image)."""
  namespace = {"nn": torch.nn, "torch": torch, "trunc_normal_": torch.nn.init.trunc_normal_}
  attention = classes(path, {"WindowAttention"}, namespace)["WindowAttention"]
  heads, table = 2, rng.normal(size=(7 * 7, 2))
  for window in (4, 6):
    module = attention(dim=8, window_size=(window, window), num_heads=heads)
    side = 2 * window - 1
    image = torch.tensor(table).permute(1, 0).view(1, heads, 7, 7)
    resized = F.interpolate(image, size=(side, side), mode="bicubic") if window != 4 else image
    module.relative_position_bias_table.data = resized.view(heads, -1).permute(1, 0)
    index = module.relative_position_index.view(-1)
    bias = module.relative_position_bias_table[index].view(window**2, window**2, -1)
    name = f"swin/window={window}"
    arrays[f"{name}/out"] = bias.permute(2, 0, 1).detach().numpy()
    cases.append(dict(name=name, kind="swin", trained=(4, 4), window=(window, window)))
  arrays["swin/table"] = table


def detr(path: pathlib.Path, arrays: dict, cases: list) -> None:
  """DETR's `PositionEmbeddingSine` on a padding mask (True: padding), normalised or not."""

  class NestedTensor:  # DETR's util.misc container, as its forward reads it
    def __init__(self, tensors, mask):
      self.tensors, self.mask = tensors, mask

  namespace = {"torch": torch, "nn": torch.nn, "math": math, "NestedTensor": NestedTensor}
  sine = classes(path, {"PositionEmbeddingSine"}, namespace)["PositionEmbeddingSine"]
  mask = np.zeros((3, 5, 7), bool)
  mask[1, 3:, :] = True
  mask[2, 4:, :] = mask[2, :, 4:] = True
  arrays["detr/mask"] = mask
  for normalize, temperature in ((False, 10000), (True, 10000), (True, 20)):
    module = sine(num_pos_feats=16, temperature=temperature, normalize=normalize)
    out = module(NestedTensor(torch.zeros(3, 1, 5, 7), torch.tensor(mask)))
    name = f"detr/normalize={normalize}/temperature={temperature}"
    arrays[f"{name}/out"] = out.permute(0, 2, 3, 1).numpy()  # [B, H, W, D]
    cases.append(dict(name=name, kind="detr", dim=32, normalize=normalize, temperature=temperature))


def mae(path: pathlib.Path, arrays: dict, cases: list) -> None:
  """MAE's `get_2d_sincos_pos_embed` (with its class-token row; its `np.float`, gone from
  NumPy 1.24, read as float)."""
  shim = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
  shim.float = float
  names = {"get_2d_sincos_pos_embed", "get_2d_sincos_pos_embed_from_grid",
           "get_1d_sincos_pos_embed_from_grid"}  # fmt: skip
  table = functions(path, names, {"np": shim})["get_2d_sincos_pos_embed"]
  for dim, size in ((32, 5), (64, 7)):
    name = f"mae/{dim}/{size}"
    arrays[f"{name}/out"] = table(dim, size, cls_token=True)
    cases.append(dict(name=name, kind="mae", dim=dim, grid=(size, size)))


def big_vision(path: pathlib.Path, arrays: dict, cases: list) -> None:
  """big_vision's `posemb_sincos_2d` (jax.numpy's calls, run on NumPy's)."""
  table = functions(path, {"posemb_sincos_2d"}, {"jnp": np})["posemb_sincos_2d"]
  for h, w, width, temperature in ((3, 5, 32, 10_000.0), (6, 4, 64, 100.0)):
    name = f"big_vision/{h}x{w}/{width}/{temperature}"
    arrays[f"{name}/out"] = table(h, w, width, temperature=temperature, dtype=np.float64)[0]
    cases.append(dict(name=name, kind="big_vision", grid=(h, w), dim=width,
                      temperature=temperature))  # fmt: skip


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  for name in REFERENCES:
    parser.add_argument(f"--{name}", type=pathlib.Path, required=True, help="a checkout")
    parser.add_argument(f"--{name}-commit", help="its commit, where the path is not a git checkout")
  args = parser.parse_args()
  rng = Float32Inputs(0)
  arrays: dict = {}
  cases: list = []
  path = lambda flag: getattr(args, flag.replace("-", "_")) / REFERENCES[flag][1]
  resizes(rng, arrays, cases)
  rope_vit(path("rope-vit"), rng, arrays, cases)
  rotary_embedding_torch(rng, arrays, cases)
  dinov3(path("dinov3"), rng, arrays, cases)
  swin(path("swin"), rng, arrays, cases)
  detr(path("detr"), arrays, cases)
  mae(path("mae"), arrays, cases)
  big_vision(path("big-vision"), arrays, cases)
  versions = {
    "torch": torch.__version__,
    "rotary-embedding-torch": importlib.metadata.version("rotary-embedding-torch"),
  }
  for flag, (repository, _) in REFERENCES.items():
    name = flag.replace("-", "_")
    versions[repository] = _commit(getattr(args, name), getattr(args, f"{name}_commit"))
  arrays["cases"] = np.array(json.dumps({"cases": cases, "versions": versions}))
  # float32 keeps the file small: inputs are drawn as float32 (the reference reads them
  # exactly), outputs are rounded to float32 after a float64 computation
  arrays = {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in arrays.items()}
  np.savez_compressed(OUT, **arrays)
  print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
  main()
