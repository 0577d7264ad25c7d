"""Every trainer command the docs show in a code block loads, validates and builds its model.

A documented `python -m lfpe.main ...` (README, docs/, the experiments' and benchmarks'
READMEs; continued lines joined) is read as the trainer reads it (`split_overrides`,
`config_cli.load`), checked by `validate.validate_config` on the devices it names (an
`XLA_FLAGS=...device_count=N` prefix, else one) and its model built, so a command a user
pastes fails here, not on a cluster. Nothing trains and no dataset is read. A placeholder
config (`configs/X.py:ARGS`) is skipped; a shell redirection or a trailing `&` is cut off.
"""

import pathlib
import re
import shlex

import pytest

from lfpe.main import split_overrides
from lfpe.train import config_cli, validate

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [
  ROOT / "README.md",
  *sorted(ROOT.glob("docs/*.md")),
  *sorted(ROOT.glob("experiments/*/README.md")),
  ROOT / "benchmarks" / "README.md",
]
COMMAND = re.compile(r"(?:XLA_FLAGS=\S*device_count=(\d+)\s+)?python3? -m lfpe\.main\s+(.*)")
SHELL = re.compile(r"\s(?:\d?>|&|\||;)")  # where the shell takes over from the command


def commands(text: str):
  """(devices, argv) of each trainer command in `text`'s code blocks."""
  for block in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S):
    for line in re.sub(r"\\\n\s*", " ", block).splitlines():
      found = COMMAND.search(line)
      if found:
        yield int(found.group(1) or 1), shlex.split(SHELL.split(found.group(2))[0])


DOCUMENTED = [
  pytest.param(devices, argv, id=f"{doc.relative_to(ROOT)}#{i}")
  for doc in DOCS
  for i, (devices, argv) in enumerate(commands(doc.read_text()))
  if not any(arg.startswith("--config=configs/X.py") for arg in argv)
]


def test_the_reader_finds_commands_as_the_docs_write_them():
  text = (
    "```bash\nXLA_FLAGS=--xla_force_host_platform_device_count=8 python -m lfpe.main \\\n"
    "    --config=c.py:a=1 --config.x='(1, 2)' --workdir=/tmp/w > log 2>&1 &'\n```\n"
    "Prose `python -m lfpe.main --config=p.py` is not a block."
  )
  assert list(commands(text)) == [
    (8, ["--config=c.py:a=1", "--config.x=(1, 2)", "--workdir=/tmp/w"])
  ]
  assert len(DOCUMENTED) >= 15  # the README's and docs' examples were found


@pytest.mark.parametrize("devices, argv", DOCUMENTED)
def test_every_documented_command_validates(devices, argv):
  from lfpe import tasks

  rest, overrides = split_overrides(["lfpe.main", *argv])
  config_arg = next(a.split("=", 1)[1] for a in rest if a.startswith("--config="))
  assert {a.split("=", 1)[0] for a in rest[1:]} <= {"--config", "--workdir"}, rest
  config = config_cli.load(str(ROOT / config_arg), overrides)
  validate.validate_config(config, num_devices=devices)
  tasks.get(config.task).create_model(config)
