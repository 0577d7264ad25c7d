"""What the resolution benchmark tests: each published (or lfpe's) ordering as two
(arm, policy) cells, and which of them are lfpe's reading of a figure rather than a stated
claim. `report.claims` tests each at `plan.CLAIM_SIZES`, at defaults and tuned."""

TABLE_2 = "Table 2 (unseen sizes, raw positions; here Embed-2D resized by PyTorch's bicubic)"

# (paper, item, claim, (arm, policy) a, (arm, policy) b): a keeps more accuracy than b.
PUBLISHED = (
  (
    "rope-vit",
    "Heo et al. 2024, Fig. 3",
    "RoPE-Mixed extrapolates better than RoPE-Axial",
    ("rope_mixed", "extrapolate"),
    ("rope_axial", "extrapolate"),
  ),
  (
    "rope-vit",
    "Heo et al. 2024, Fig. 3",
    "RoPE-Mixed extrapolated beats the interpolated 2-D table (APE, PyTorch bicubic)",
    ("rope_mixed", "extrapolate"),
    ("embed_1d", "bicubic_pytorch"),
  ),
  (
    "rope-vit",
    "Heo et al. 2024, Fig. 3",
    "RoPE-Axial extrapolated beats the interpolated 2-D table (APE, PyTorch bicubic)",
    ("rope_axial", "extrapolate"),
    ("embed_1d", "bicubic_pytorch"),
  ),
  (  # 002's Embed-2D looks up rows no training size reached (its Sec. 4.2: positions "never
    # seen during training"); lfpe's resizes its tables, a stronger baseline (said in TABLE_2)
    "002",
    TABLE_2,
    "Learnable-Fourier+MLP generalises to unseen sizes better than Embed-2D",
    ("fourier", "extrapolate"),
    ("embed_2d", "bicubic_pytorch"),
  ),
  (  # rope-vit extrapolates at a new size; PI per axis is lfpe's (rotary-embedding-torch's)
    "PI",
    "Chen et al. 2023, applied per axis by lfpe",
    "position interpolation helps RoPE-Axial",
    ("rope_axial", "pi"),
    ("rope_axial", "extrapolate"),
  ),
  (
    "PI",
    "Chen et al. 2023, applied per axis by lfpe",
    "position interpolation helps RoPE-Mixed",
    ("rope_mixed", "pi"),
    ("rope_mixed", "extrapolate"),
  ),
  (
    "NTK",
    "bloc97 2023, per axis by lfpe",
    "NTK-aware scaling helps RoPE-Axial",
    ("rope_axial", "ntk"),
    ("rope_axial", "extrapolate"),
  ),
  (
    "YaRN",
    "Peng et al. 2023, per axis by lfpe",
    "NTK-by-parts with YaRN's temperature helps RoPE-Axial (on 8 patches a side: PI on every "
    "pair, with the temperature)",
    ("rope_axial", "yarn"),
    ("rope_axial", "extrapolate"),
  ),
  (  # DINOv3 states what its box jittering is for (adapting to resolution), not a comparison
    # with RoPE on indices: the recipe against indices and its coordinates alone are lfpe's
    "lfpe",
    "DINOv3's recipe against indices",
    "DINOv3's RoPE recipe holds up at other sizes better than RoPE-Axial on indices",
    ("rope_axial dinov3", "extrapolate"),
    ("rope_axial", "extrapolate"),
  ),
  (
    "lfpe",
    "DINOv3's recipe, ablated",
    "DINOv3's normalised coordinates alone hold up at other sizes better than indices",
    ("rope_axial dinov3-coords", "extrapolate"),
    ("rope_axial", "extrapolate"),
  ),
  (
    "DINOv3",
    "Siméoni et al. 2025, RoPE box jittering (released rescale 2)",
    "DINOv3's coordinate augmentation helps on top of its normalised coordinates",
    ("rope_axial dinov3", "extrapolate"),
    ("rope_axial dinov3-coords", "extrapolate"),
  ),
  (  # each resampling policy of the learned tables against PyTorch's bicubic (lfpe's)
    "lfpe",
    "resampling learned tables",
    "PyTorch's bicubic resizes the 2-D table (APE) better than bilinear",
    ("embed_1d", "bicubic_pytorch"),
    ("embed_1d", "bilinear"),
  ),
  (
    "lfpe",
    "resampling learned tables",
    "PyTorch's bicubic (a = -0.75) resizes the 2-D table (APE) better than timm's "
    "antialiased bicubic (a = -0.5)",
    ("embed_1d", "bicubic_pytorch"),
    ("embed_1d", "bicubic"),
  ),
  (
    "lfpe",
    "resampling learned tables",
    "PyTorch's bicubic resizes the per-axis tables (Embed-2D) better than bilinear",
    ("embed_2d", "bicubic_pytorch"),
    ("embed_2d", "bilinear"),
  ),
  (
    "lfpe",
    "mixed-resolution training",
    "training at mixed sizes (48-96 px) helps RoPE-Mixed",
    ("rope_mixed mixed-res", "extrapolate"),
    ("rope_mixed", "extrapolate"),
  ),
  (
    "lfpe",
    "mixed-resolution training",
    "training at mixed sizes (48-96 px) helps RoPE-Mixed with position interpolation",
    ("rope_mixed mixed-res", "pi"),
    ("rope_mixed", "pi"),
  ),
)


# Items of `PUBLISHED` that are lfpe's reading of a figure's or table's numbers (`source`
# 'table'), not an ordering the source states in words: rope-vit's Fig. 3 curves, and 002's
# detection Table 2 carried over to classification at unseen sizes.
READ_OFF = ("Heo et al. 2024, Fig. 3", TABLE_2)
