"""The soak of the default Slurm script: ``scripts/slurm_soak.py --jobs 30`` submits the
script ``starchol slurm`` writes by default (sbc on 6 nodes of the emulated cluster, HDF5
input and output, --check) 30 times in a row, never resubmitting; every job must end
COMPLETED with a report that matches and a factor with L L^T = A. About 5 to 6 minutes
on 2 cores: slow suite. Needs root and network namespaces; skipped otherwise."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[1] / "scripts" / "slurm_soak.py"
JOBS = 30

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.timeout(1800)]


def test_thirty_default_slurm_jobs_in_a_row():
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("an emulated cluster needs root (network namespaces, tc, slurmd)")
    proc = subprocess.run([sys.executable, str(SOAK), "--jobs", str(JOBS)],
                          capture_output=True, text=True, timeout=1700)
    if proc.returncode == 77:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    print(proc.stdout)
    assert "launch: mpirun " in proc.stdout, proc.stdout     # the default launcher
    assert proc.returncode == 0 and f"{JOBS}/{JOBS} jobs succeeded" in proc.stdout, \
        proc.stdout + proc.stderr
