"""The example programs refuse bad arguments as usage errors (status 2, one line from
their parser), not tracebacks (issue 47, Medium): ``examples/gp_loglik.py``."""
import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "gp_loglik.py")

CASES = [("--n 0", "argument --n: must be an integer >= 1"),
         ("--nb 0", "argument --nb: must be an integer >= 1"),
         ("--dist bogus", "unknown map 'bogus'"),
         ("--noise nan", "argument --noise: must be a finite number > 0"),
         ("--length-scale -1", "argument --length-scale"),
         ("--grid 3x3", "grid"),
         ("--seed -1", "argument --seed"),
         ("--workers 0", "argument --workers"),
         ("--mixed --dist bogus", "unknown map 'bogus'")]


@pytest.mark.parametrize("args, words", CASES, ids=[c[0] for c in CASES])
def test_gp_loglik_refuses_bad_arguments(args, words, tmp_path):
    env = dict(os.environ, STARPU_HOME=str(tmp_path), STARPU_SILENT="1")
    p = subprocess.run([sys.executable, EXAMPLE, *args.split()], capture_output=True,
                       text=True, timeout=120, env=env, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("gp_loglik.py: error: ") and words in last, p.stderr
    assert "Traceback" not in p.stderr
