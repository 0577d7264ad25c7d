"""The README's Python examples run and print what they claim."""

import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run_and_print_their_comments():
  blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
  assert blocks, "README has no python example"
  for block in blocks:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    for expected in re.findall(r"print\(.*\)\s+# (.+)", block):
      assert expected.strip() in out.getvalue(), (expected, out.getvalue())
