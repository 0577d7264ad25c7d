"""Every user mistake on `python -m lfpe.main` is one line naming the field, and exit 2.

Each case runs the real command line as a subprocess (8 fake CPU devices, inherited from
tests/conftest.py) and must fail before training: exit status 2, no traceback, one
`lfpe.main: ...` line on stderr that names the flag or field (and, for a misspelling, says
"did you mean"). Workdirs with a record are in test_workdir_record.py.
"""

import pytest
from cli_helpers import assert_one_line_error, run_main

from lfpe import data as data_lib

pytestmark = pytest.mark.cli  # starts lfpe's command line: pinned stack only (.ci/run)

SMALL = "--config=configs/vit_digits.py:small=1"
FULL = "--config=configs/vit_digits.py"


# (id, arguments after --config/--workdir defaults, texts the message must hold).
# "{w}" in an argument is the test's workdir.
MISTAKES = [
  # Flags.
  ("unknown flag", (SMALL, "--workdr={w}"), ("--workdr", "did you mean 'workdir'")),
  (
    "config field as a flag",
    (SMALL, "--workdir={w}", "--total_steps=5"),
    ("--total_steps", "e.g. --config.total_steps"),
  ),
  ("no workdir", (SMALL,), ("--workdir is required",)),
  ("no config", ("--workdir={w}",), ("--config is required",)),
  ("positional argument", (SMALL, "--workdir={w}", "extra"), ("unexpected argument 'extra'",)),
  ("override without value", (SMALL, "--workdir={w}", "--config.seed"), ("--config.seed",)),
  # The config file and its argument.
  (
    "missing config file",
    ("--config=configs/vit_digit.py", "--workdir={w}"),
    ("configs/vit_digit.py", "did you mean 'configs/vit_digits.py'"),
  ),
  (
    "unknown config argument",
    ("--config=configs/vit_digits.py:gama=0.5", "--workdir={w}"),
    ("'gama'", "did you mean 'gamma'"),
  ),
  (
    "bad config argument",
    ("--config=configs/vit_digits.py:small=maybe", "--workdir={w}"),
    ("small='maybe'", "boolean"),
  ),
  (
    "misspelled encoding in the config argument",
    ("--config=configs/vit_digits.py:posemb=fourer", "--workdir={w}"),
    ("posemb=fourer", "did you mean 'fourier'"),
  ),
  # Overrides: names and types.
  (
    "misspelled field",
    (SMALL, "--workdir={w}", "--config.totl_steps=5"),
    ("--config.totl_steps", "did you mean 'total_steps'"),
  ),
  (
    "misspelled nested field",
    (SMALL, "--workdir={w}", "--config.optim.lrr=0.1"),
    ("--config.optim.lrr", "config.optim has no field 'lrr'", "did you mean 'lr'"),
  ),
  (
    "misspelled deep field",
    (SMALL, "--workdir={w}", "--config.data.nme=digits"),
    ("config.data has no field 'nme'", "did you mean 'name'"),
  ),
  (
    "misspelled model field the config file leaves out",
    (SMALL, "--workdir={w}", "--config.model.posemb_gird=4"),
    ("the vit model has no field 'posemb_gird'", "did you mean 'posemb_grid'"),
  ),
  (
    "model field the task sets",
    (SMALL, "--workdir={w}", "--config.model.image_size=32"),
    ("--config.model.image_size", "from config.data.image_size; set that"),
  ),
  (
    "field below a value",
    (SMALL, "--workdir={w}", "--config.seed.x=1"),
    ("--config.seed.x", "config.seed is a value"),
  ),
  (
    "group set whole",
    (SMALL, "--workdir={w}", "--config.optim=adam"),
    ("--config.optim", "a group of fields", "lr"),
  ),
  (
    "int field",
    (SMALL, "--workdir={w}", "--config.total_steps=abc"),
    ("--config.total_steps='abc'", "integer"),
  ),
  (
    "float field",
    (SMALL, "--workdir={w}", "--config.optim.lr=fast"),
    ("--config.optim.lr='fast'", "number"),
  ),
  (
    "bool field",
    (SMALL, "--workdir={w}", "--config.progress=maybe"),
    ("--config.progress='maybe'", "boolean"),
  ),
  # Encoding specs and their options.
  (
    "misspelled spec option",
    (SMALL, "--workdir={w}", "--config.model.posemb.gama=0.5"),
    ("--config.model.posemb.gama", "did you mean 'gamma'", "--config.model.posemb='NAME("),
  ),
  (
    "option the encoding lacks",
    (SMALL, "--workdir={w}", "--config.model.posemb=embed_1d", "--config.model.posemb.gamma=1"),
    ("--config.model.posemb.gamma", "encoding 'embed_1d' has no option 'gamma'"),
  ),
  (
    "bad spec option value",
    (SMALL, "--workdir={w}", "--config.model.posemb.gamma=-1"),
    ("model.posemb", "gamma"),
  ),
  (
    "option dropped by a later spec",
    (
      SMALL,
      "--workdir={w}",
      "--config.model.posemb.gamma=0.5",
      "--config.model.posemb=embed_1d",
    ),
    ("--config.model.posemb=embed_1d", "would drop --config.model.posemb.gamma=0.5"),
  ),
  (
    "spec option twice",
    (SMALL, "--workdir={w}", "--config.model.posemb=fourier(gamma=0.5, gamma=1)"),
    ("model.posemb", "sets 'gamma' twice"),
  ),
  (
    "spec option the model sets",
    (SMALL, "--workdir={w}", "--config.model.posemb=learnable_sine(dim=5)"),
    ("model.posemb", "option 'dim' of encoding 'learnable_sine' is set by the model"),
  ),
  (
    "misspelled encoding",
    (SMALL, "--workdir={w}", "--config.model.posemb=fourer"),
    ("model.posemb", "'fourer'", "did you mean 'fourier'"),
  ),
  (
    "spec syntax",
    (SMALL, "--workdir={w}", "--config.model.posemb=fourier(gamma="),
    ("model.posemb", "is not 'name' or 'name(option=value, ...)'"),
  ),
  # Values the trainer refuses.
  ("negative batch", (SMALL, "--workdir={w}", "--config.batch_size=-8"), ("config.batch_size",)),
  ("zero steps", (SMALL, "--workdir={w}", "--config.total_steps=0"), ("config.total_steps",)),
  ("zero log interval", (SMALL, "--workdir={w}", "--config.log_every=0"), ("config.log_every",)),
  ("zero eval interval", (SMALL, "--workdir={w}", "--config.eval_every=0"), ("config.eval_every",)),
  (
    "zero checkpoint interval",
    (SMALL, "--workdir={w}", "--config.checkpoint_every=0"),
    ("config.checkpoint_every", ">= 1"),
  ),
  (
    "no checkpoints kept",
    (SMALL, "--workdir={w}", "--config.keep_checkpoints=0"),
    ("config.keep_checkpoints", ">= 1"),
  ),
  (
    "negative warmup",
    (SMALL, "--workdir={w}", "--config.schedule.warmup_steps=-1"),
    ("config.schedule.warmup_steps", ">= 0"),
  ),
  ("negative rate", (SMALL, "--workdir={w}", "--config.optim.lr=-0.1"), ("config.optim.lr", "> 0")),
  (
    "heads that do not divide the width",
    (SMALL, "--workdir={w}", "--config.model.num_heads=3"),
    ("model.num_heads=3 must divide model.width=16",),
  ),
  (
    "dtype",
    (SMALL, "--workdir={w}", "--config.compute_dtype=float16"),
    ("config.compute_dtype", "float32"),
  ),
  (
    "optimizer",
    (SMALL, "--workdir={w}", "--config.optim.name=adan"),
    ("config.optim.name", "did you mean 'adamw'"),
  ),
  ("beta", (SMALL, "--workdir={w}", "--config.optim.b1=1.5"), ("config.optim.b1",)),
  (
    "schedule",
    (SMALL, "--workdir={w}", "--config.schedule.name=cosine"),
    ("config.schedule.name",),
  ),
  (
    "task",
    (SMALL, "--workdir={w}", "--config.task.name=clasification"),
    ("config.task.name", "did you mean 'classification'"),
  ),
  ("model family", (SMALL, "--workdir={w}", "--config.model_name=vitt"), ("model_name",)),
  (
    "dataset",
    (SMALL, "--workdir={w}", "--config.data.name=digitz"),
    ("data.name", "did you mean 'digits'"),
  ),
  ("depth", (SMALL, "--workdir={w}", "--config.model.depth=-1"), ("model.depth",)),
  ("patch size", (SMALL, "--workdir={w}", "--config.model.patch_size=3"), ("model.patch_size",)),
  ("pool", (SMALL, "--workdir={w}", "--config.model.pool=max"), ("model.pool",)),
  # The mesh.
  (
    "model axis and heads",
    (FULL, "--workdir={w}", "--config.mesh.model=3"),
    ("config.mesh.model", "config.model.num_heads=4", "[1, 2, 4]"),
  ),
  (
    "data axis and batch",
    (SMALL, "--workdir={w}", "--config.mesh.data=3"),
    ("config.batch_size", "mesh.data"),
  ),
  ("too many devices", (SMALL, "--workdir={w}", "--config.mesh.model=16"), ("config.mesh",)),
  (
    "mesh beyond the CPU's devices",
    (SMALL, "--workdir={w}", "--config.mesh.data=4", "--config.mesh.model=4"),
    ("only 8 exist", "XLA_FLAGS=--xla_force_host_platform_device_count=16"),
  ),
  (
    "init_from nowhere",
    (SMALL, "--workdir={w}", "--config.init_from=/nonexistent/run"),
    ("config.init_from='/nonexistent/run' is neither a workdir with checkpoints",),
  ),
  # Workdirs.
  ("workdir is a file", (SMALL, "--workdir={file}"), ("is a file, not a directory",)),
  (
    "workdir not writable",
    (SMALL, "--workdir=/proc/lfpe_workdir"),
    ("--workdir=/proc/lfpe_workdir cannot be written",),
  ),
  (
    "remote workdir",
    (SMALL, "--workdir=gs://bucket/run"),
    ("cannot be reached", "install gcsfs", 'pip install "lfpe[cloud]"'),  # epath's backend
  ),
  (
    "remote data_dir",
    (SMALL, "--workdir={w}", "--config.data.data_dir=s3://bucket/data"),
    ("config.data.data_dir=s3://bucket/data cannot be reached", 'pip install "lfpe[cloud]"'),
  ),
]


@pytest.mark.parametrize("args, expected", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_mistake_is_one_line_and_exit_2(tmp_path, args, expected):
  (tmp_path / "file").write_text("not a directory")
  places = {"w": tmp_path / "w", "file": tmp_path / "file"}
  result = run_main(*(a.format(**places) for a in args))
  assert_one_line_error(result, *expected)
  assert not (tmp_path / "w" / "config.json").exists()  # a refused run writes no record


def test_fifty_distinct_mistakes():
  assert len({m[0] for m in MISTAKES}) == len(MISTAKES) >= 50


def test_traceback_on_request_for_a_command_line_mistake(tmp_path):
  result = run_main(SMALL, f"--workdir={tmp_path}", "--config.totl_steps=5", LFPE_TRACEBACK="1")
  assert result.returncode == 2
  assert "Traceback" in result.stderr and "ConfigError" in result.stderr
  assert "lfpe.main: --config.totl_steps" in result.stderr


def test_a_damaged_dataset_is_one_line_naming_the_folder_to_delete(tmp_path):
  data_dir = tmp_path / "tfds"
  data_lib.prepare("digits", str(data_dir))
  [shard] = (data_dir / "digits" / "1.0.0").glob("digits-train.array_record-*")
  shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
  result = run_main(SMALL, f"--workdir={tmp_path / 'w'}", f"--config.data.data_dir={data_dir}")
  assert_one_line_error(
    result,
    f"Dataset 'digits' in {data_dir}/digits/1.0.0 cannot be read: a file is damaged or missing "
    f"({shard.name} is not a readable array_record file).",
    f"Delete {data_dir}/digits/1.0.0; the next run builds it again.",
  )


@pytest.mark.parametrize("flag", ["--help", "-h", "--helpfull"])
def test_help_is_printed_with_status_0(flag):
  result = run_main(flag)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "--config" in result.stdout and "--workdir" in result.stdout
