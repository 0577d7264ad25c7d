"""Running `python -m lfpe.main` as a user would, for the command-line tests."""

import os
import signal
import subprocess
import sys
import threading

ROOT = os.path.join(os.path.dirname(__file__), "..")
STARTED_LIMIT_S = 600  # `start_main`: a run still going then is killed


def run_main(*args, **env):
  """`python -m lfpe.main ARGS` from the repository root (LFPE_TRACEBACK unset unless given);
  stderr is a pipe, not a terminal, as in a cluster job."""
  return subprocess.run(
    _command(args), cwd=ROOT, env=_env(env), capture_output=True, text=True, timeout=300
  )


def start_main(*args, **env):
  """`run_main` started, not waited for: a Popen whose stderr is a text pipe. SIGINT is
  restored to Python's default in it, as in a terminal: a suite started in the background
  (`bash scripts/test.sh &`) passes SIGINT on ignored, and the run would not hear Ctrl-C. It
  leads its own process group, as a terminal's foreground job: `os.killpg(job.pid, SIGINT)`
  is a terminal's Ctrl-C, which reaches its data workers too. Still running after
  `STARTED_LIMIT_S`, its group is killed: a test reading its stderr to a line that never
  comes then fails, instead of hanging the suite until CI's own limit."""
  job = subprocess.Popen(
    _command(args),
    cwd=ROOT,
    env=_env(env),
    stderr=subprocess.PIPE,
    text=True,
    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    process_group=0,
  )
  limit = threading.Timer(STARTED_LIMIT_S, _kill_group, (job,))
  limit.daemon = True
  limit.start()
  return job


def _kill_group(job):
  if job.poll() is None:
    try:
      os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass


def _command(args):
  return [sys.executable, "-m", "lfpe.main", *args]


def _env(extra):
  environ = {k: v for k, v in os.environ.items() if k != "LFPE_TRACEBACK"}
  return {**environ, **extra}


def assert_one_line_error(result, *expected):
  """Exit 2, no traceback, and one `lfpe.main:` line holding every `expected` text."""
  assert result.returncode == 2, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  lines = [line for line in result.stderr.splitlines() if line.startswith("lfpe.main: ")]
  assert len(lines) == 1, result.stderr[-3000:]
  for text in expected:
    assert text in lines[0], lines[0]
  return lines[0]
