"""GPU layer: CUDA codelets, performance models, HeteroPrio, per-kernel counts, --gpus.

Three groups:
- CPU-side checks (default suite): the scheduler configuration and the GPU options on a
  machine without a GPU, with real StarPU-MPI runs;
- ``gpu`` tests: need a visible CUDA GPU and a CUDA build, skipped otherwise (they run
  in ``scripts/gpu-check.sh`` on the GPU machine);
- ``slow`` + compile check: StarPU and starchol's GPU layer built with CUDA from NVIDIA's
  wheels fetched into ``.gpu-deps/`` (``scripts/gpu-compile-check.sh``), skipped when
  they are not there (CI never downloads them).
"""
import json
import os
import re
import shutil
import subprocess
import sys
from math import comb
from pathlib import Path

import pytest

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
_gpu = pytest.importorskip("starchol.runtime._gpu", reason="GPU/scheduler layer not built")

from starchol.errors import UsageError  # noqa: E402
from starchol.runtime import _binding as _starpu, gpu  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HAS_GPU = gpu.visible_gpus() > 0
needs_gpu = pytest.mark.skipif(
    not HAS_GPU, reason=("no CUDA GPU visible to this process" if gpu.cuda_built() else
                         "starchol's GPU layer was built without CUDA (StarPU without CUDA)"))


def graph_counts(nt):
    """Tasks per kernel of the tiled Cholesky on NT x NT tiles."""
    return {"potrf": nt, "trsm": comb(nt, 2), "syrk": comb(nt, 2), "gemm": comb(nt, 3)}


# -- pure checks ---------------------------------------------------------------------------
def test_kernel_names_and_precisions():
    assert gpu.kernel_of("potrf") == ("potrf", "d")
    assert gpu.kernel_of("gemm0") == ("gemm0", "d")
    assert gpu.kernel_of("potrf_s") == ("potrf", "s")
    assert gpu.kernel_of("sgemm") == ("gemm", "s")
    assert gpu.kernel_of("dtrsm") == ("trsm", "d")
    assert gpu.kernel_of("syrk_f32") == ("syrk", "s")
    assert gpu.kernel_of("starpu_data_unregister") is None
    assert set(_gpu.kernel_names()) == set(gpu.KERNEL_BUCKET)
    # every codelet of the binding is a known kernel
    assert all(gpu.kernel_of(n) for n in _starpu.codelet_addresses())
    # both precisions get their CUDA variants and models
    names = gpu._codelets(_starpu)
    assert {gpu.kernel_of(n)[1] for n in names} == {"d", "s"}
    assert len(names) == 2 * len(_gpu.kernel_names())


def test_heteroprio_orders():
    # GPUs favour GEMM and SYRK, CPUs POTRF and TRSM; each arch lists every kernel bucket
    # it can run once, and TRIL (CPU only) is never visited by GPUs
    assert gpu.CUDA_ORDER[:2] == [gpu.GEMM, gpu.SYRK]
    assert gpu.CPU_ORDER.index(gpu.POTRF) < gpu.CPU_ORDER.index(gpu.TRSM) \
        < gpu.CPU_ORDER.index(gpu.SYRK) < gpu.CPU_ORDER.index(gpu.GEMM)
    assert gpu.CPU_ONLY not in gpu.CUDA_ORDER
    for order in (gpu.CPU_ORDER, gpu.CUDA_ORDER):
        assert len(order) == len(set(order))
    assert "tril" not in gpu.CUDA_KERNELS


def test_cpu_path_unchanged_by_default():
    """prio without GPUs (--gpus 0, the default where none is visible): no CUDA variant,
    no model, no custom policy."""
    for gpus in (0,) if HAS_GPU else (0, None):
        p, kwargs = gpu.plan(_starpu, "prio", gpus)
        assert kwargs == {} and p.ncuda == 0 and not p.models and p.cuda_codelets == []
        for addr in _starpu.codelet_addresses().values():
            assert not _gpu.has_cuda(addr)
    if HAS_GPU:   # the default takes every visible GPU
        assert gpu.plan(_starpu, "prio", None)[0].ncuda == gpu.visible_gpus()
        gpu.plan(_starpu, "prio", 0)   # the codelets back to CPU only for the next tests


def test_gpus_option_checked():
    assert gpu.check_gpus(0) == 0
    with pytest.raises(UsageError, match="^gpus must be an integer >= 0") as info:
        gpu.check_gpus(-1)
    assert info.value.params == ("gpus",)
    with pytest.raises(UsageError, match="integer"):
        gpu.check_gpus("two")
    if not HAS_GPU:
        with pytest.raises(UsageError, match="^gpus 1: "):
            gpu.check_gpus(1)
    assert gpu.check_gpus(None) == gpu.visible_gpus()


def test_each_cuda_worker_keeps_a_core():
    from starchol.runtime.workers import workers_per_rank

    env = {"STARCHOL_RESERVE_MPI_CORE": "0"}
    # starchol's default: 4 CUDA workers (streams) per GPU, each with its core, fewer
    # where the rank's cores are too few (one is left for a CPU worker)
    assert workers_per_rank(16, 256, env, gpus=1) == 12
    assert workers_per_rank(16, 256, env, gpus=2) == 8
    assert workers_per_rank(8, 256, env, gpus=2) == 2      # 3 CUDA workers per GPU
    assert workers_per_rank(3, 256, env, gpus=1) == 1      # 2 CUDA workers
    assert workers_per_rank(1, 256, env, gpus=1) == 1
    assert workers_per_rank(16, 256, env) == 16
    # STARPU_NWORKER_PER_CUDA, when set, is StarPU's and starchol's count
    for n, cpus in (("1", 15), ("4", 12), ("6", 10)):
        env_n = {**env, "STARPU_NWORKER_PER_CUDA": n}
        assert workers_per_rank(16, 256, env_n, gpus=1) == cpus
        assert workers_per_rank(16, 256, env_n) == 16


def test_cuda_workers_per_gpu_default_and_cap():
    from starchol.runtime.workers import DEFAULT_CUDA_WORKERS_PER_GPU, cuda_workers_per_gpu

    assert DEFAULT_CUDA_WORKERS_PER_GPU == 4
    assert cuda_workers_per_gpu({}) == 4
    assert cuda_workers_per_gpu({}, cores=16, gpus=1) == 4
    assert cuda_workers_per_gpu({}, cores=4, gpus=1) == 3
    assert cuda_workers_per_gpu({}, cores=8, gpus=2) == 3
    assert cuda_workers_per_gpu({}, cores=2, gpus=1) == 1
    assert cuda_workers_per_gpu({}, cores=1, gpus=4) == 1
    assert cuda_workers_per_gpu({"STARPU_NWORKER_PER_CUDA": "2"}, cores=16, gpus=1) == 2
    assert cuda_workers_per_gpu({"STARPU_NWORKER_PER_CUDA": "8"}, cores=2, gpus=1) == 8


def _write_model(path, entries):
    """A StarPU 1.3 history model file (format 45) with one combination per arch:
    entries = {"cpu": [(size, mean_us, n)], "cuda": [...]}."""
    lines = ["##################", "# Performance Model Version", "45", "",
             "####################", "# COMBs", "# number of combinations", str(len(entries))]
    for c, (arch, rows) in enumerate(entries.items()):
        lines += ["####################", f"# COMB_{c}", "# number of types devices", "1",
                  "####################", "# DEV_0",
                  "# device type (CPU - 0, CUDA - 1, OPENCL - 2, MIC - 3, MPI_MS - 5)",
                  "0" if arch == "cpu" else "1", "####################", "# DEV_0",
                  "# device id ", "0", "####################", "# DEV_0",
                  "# number of cores ", "1", "##########", "# number of implementations", "1",
                  "#####", f"# Model for {arch}0_impl0 (Comb{c})", "# number of entries",
                  str(len(rows)),
                  "# sumlnx\tsumlnx2\t\tsumlny\t\tsumlnxlny\talpha\t\tbeta\t\tn\tminx\t\tmaxx",
                  "0.0 0.0 0.0 0.0 nan nan 0 0 0", "# a\t\tb\t\tc", "nan nan nan",
                  "# not multiple-regression-base", "0",
                  "# hash\t\tsize\t\tflops\t\tmean (us)\tdev (us)\tsum\t\tsum2\t\tn"]
        for size, mean, n in rows:
            lines.append(f"5c6c3401\t{size}\t0.0\t{mean:e}\t1.0\t{mean * n:e}\t0.0\t{n}")
    path.write_text("\n".join(lines) + "\n")


def test_heteroprio_factors_from_models(tmp_path, monkeypatch):
    host = "testhost"
    monkeypatch.setenv("STARPU_HOSTNAME", host)
    folder = tmp_path / "codelets"
    (folder / "45").mkdir(parents=True)
    nb3 = 3 * 512 * 512 * 8
    _write_model(folder / "45" / f"starchol_gemm_d.{host}",
                 {"cpu": [(nb3, 6000.0, 20), (100, 1.0, 1)], "cuda": [(nb3, 30.0, 50)]})
    _write_model(folder / "45" / f"starchol_potrf_d.{host}",
                 {"cpu": [(512 * 512 * 8, 800.0, 10)]})        # no CUDA samples yet
    parsed = gpu.read_history_model(folder / "45" / f"starchol_gemm_d.{host}")
    assert parsed == {"cpu": [(nb3, 6000.0, 20), (100, 1.0, 1)], "cuda": [(nb3, 30.0, 50)]}
    slow, source = gpu.heteroprio_factors(folder=str(folder))
    assert slow[gpu.GEMM] == pytest.approx(200.0)
    assert slow[gpu.POTRF] == gpu.DEFAULT_SLOW[gpu.POTRF]
    assert source == "models+defaults"
    empty, src = gpu.heteroprio_factors(folder=str(tmp_path / "none"))
    assert empty == gpu.DEFAULT_SLOW and src == "defaults"


# -- real runs on CPU workers ----------------------------------------------------------------
def _doc(path):
    with open(path) as f:
        return json.load(f)


@pytest.mark.mpi
def test_heteroprio_two_ranks_many_tiles(mpirun, tmp_path):
    """heteroprio at NT = 51: StarPU's heteroprio takes the task priority as a bucket
    below 100, so the graph's priorities (up to 2 NT) must not reach it; starchol's
    policy puts each task in its kernel's bucket. Bytes equal the model; the report
    counts every task of the graph, all on CPU workers here."""
    n, nb = 816, 16                       # NT = 51
    out = tmp_path / "hp.json"
    p = mpirun(2, "run", "--dist", "2dbc", "--n", n, "--nb", nb, "--sched", "heteroprio",
               "--check", "--quiet", "--json", out, timeout=150)
    assert p.rank_exits == [0, 0], p.stderr
    d = _doc(out)
    assert d["match"] and d["residual"] < 1e-14
    want = graph_counts(51)
    got = {k: v["cpu"] + v["cuda"] for k, v in d["kernels"].items()}
    assert got == want
    if not d["runtime"]["gpus_per_rank"]:
        assert all(v["cuda"] == 0 for v in d["kernels"].values())
    hp = d["runtime"]["heteroprio"]
    assert hp["cpu_order"][:3] == ["potrf", "add", "trsm"]
    assert hp["factors_from"] in ("defaults", "models", "models+defaults")
    assert "tasks per kernel (CPU/GPU workers)" in p.stdout


@pytest.mark.mpi
def test_dmdas_writes_models(mpirun, starpu_home, tmp_path):
    """A model-based scheduler calibrates the history models (CPU entries here) that the
    heteroprio factors are read from."""
    out = tmp_path / "dm.json"
    p = mpirun(1, "run", "--dist", "2dbc", "--n", 1024, "--nb", 128, "--sched", "dmdas",
               "--check", "--quiet", "--json", out, timeout=90)
    assert p.rank_exits == [0], p.stderr
    d = _doc(out)
    assert d["residual"] < 1e-14
    assert {k: v["cpu"] + v["cuda"] for k, v in d["kernels"].items()} == graph_counts(8)
    files = list(Path(starpu_home, ".starpu", "sampling", "codelets").glob("*/starchol_gemm_d.*"))
    assert files, "no model file written"
    model = gpu.read_history_model(files[0])
    assert any(size == 3 * 128 * 128 * 8 and n > 0 for size, _, n in model["cpu"])


@pytest.mark.mpi
@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_gpus_refused_without_cuda_on_every_rank(mpirun):
    p = mpirun(2, "run", "--dist", "2dbc", "--n", 256, "--nb", 64, "--gpus", 1, timeout=60)
    assert p.rank_exits == [2, 2], p.stderr
    assert len(re.findall(r"--gpus 1: ", p.stderr)) == 2, p.stderr


# -- on a GPU ----------------------------------------------------------------------------------
@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("sched", ["dmdas", "heteroprio"])
def test_gpu_factorization(mpirun, tmp_path, sched):
    out = tmp_path / f"{sched}.json"
    n, nb = 4096, 512
    p = mpirun(1, "run", "--dist", "2dbc", "--n", n, "--nb", nb, "--gpus", 1, "--sched", sched,
               "--check", "--quiet", "--json", out, timeout=240)
    assert p.rank_exits == [0], p.stderr
    d = _doc(out)
    assert d["residual"] < 1e-15, d["residual"]
    assert d["runtime"]["gpus_per_rank"] == 1
    assert {k: v["cpu"] + v["cuda"] for k, v in d["kernels"].items()} == graph_counts(8)
    assert d["kernels"]["gemm"]["cuda"] > 0
    assert d["device_bytes"]["host_to_device"] > 0


@pytest.mark.gpu
@needs_gpu
def test_gpu_two_ranks_share_the_gpu_bytes_equal_model(mpirun, tmp_path):
    out = tmp_path / "two.json"
    p = mpirun(2, "run", "--dist", "2dbc", "--n", 4096, "--nb", 512, "--gpus", 1,
               "--sched", "dmdas", "--check", "--quiet", "--json", out, timeout=240)
    assert p.rank_exits == [0, 0], p.stderr
    d = _doc(out)
    assert d["match"], (d["bytes_measured_pairs"], d["bytes_predicted_pairs"])
    assert d["residual"] < 1e-15
    assert sum(v["cuda"] for v in d["kernels"].values()) > 0


@pytest.mark.gpu
@needs_gpu
def test_gpu_non_spd_names_its_column_on_every_rank(mpirun):
    j = 3000
    p = mpirun(2, "run", "--dist", "2dbc", "--n", 4096, "--nb", 512, "--gpus", 1,
               "--sched", "dmdas", "--matrix", f"indefinite:{j}", "--quiet", timeout=240)
    assert p.rank_exits == [1, 1], p.stderr
    cols = re.findall(r"not positive definite: the factorization failed at global column (\d+)",
                      p.stderr)
    assert cols == [str(j)] * 2, p.stderr


@pytest.mark.gpu
@needs_gpu
def test_gpu_25d_bytes_equal_model_first_updates_on_the_gpu(mpirun, tmp_path):
    """2.5D (2 slices) on 4 ranks sharing the GPU: the first-update SYRK/GEMM and the ADD
    reductions have CUDA variants too; bytes still equal the model."""
    out = tmp_path / "25d.json"
    p = mpirun(4, "run", "--dist", "2dbc25d", "--slices", 2, "--n", 4096, "--nb", 512,
               "--gpus", 1, "--sched", "dmdas", "--check", "--quiet", "--json", out,
               timeout=240)
    assert p.rank_exits == [0] * 4, p.stderr
    d = _doc(out)
    assert d["match"], (d["bytes_measured_pairs"], d["bytes_predicted_pairs"])
    assert d["residual"] < 1e-15
    k = d["kernels"]
    on_gpu = sum(k.get(name, {}).get("cuda", 0) for name in ("syrk0", "gemm0", "add"))
    assert on_gpu > 0, f"no 2.5D first update or ADD ran on the GPU: {k}"


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_gpu_gp_loglik_25d(tmp_path, starpu_home, precision):
    """examples/gp_loglik.py on 4 ranks sharing the GPU (2.5D, 2 slices): factor, solve
    and log-determinant against scipy, bytes equal to the model, in both precisions
    (the float32 CUDA kernels)."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun not found")
    env = {**os.environ, "STARPU_HOME": starpu_home, "STARPU_SILENT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    cmd = [mpirun, "--oversubscribe", "--bind-to", "none", "-np", "4", sys.executable,
           str(ROOT / "examples" / "gp_loglik.py"), "--dist", "2dbc25d", "--slices", "2",
           "--n", "4000", "--nb", "500", "--workers", "2"]
    if precision == "float32":
        cmd.append("--float32")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0 and "[FAIL]" not in p.stdout, p.stdout + p.stderr[-3000:]
    assert p.stdout.count("[ok]") >= 7, p.stdout


# -- the CUDA build, compiled without a GPU --------------------------------------------------
@pytest.mark.slow
def test_cuda_build_compiles(tmp_path):
    """StarPU 1.3.10 with CUDA (patched for CUDA 13) and starchol's CUDA kernels compile
    and link against NVIDIA's cuBLAS/cuSOLVER wheels; the CUDA-enabled StarPU then runs
    a factorization on CPU workers (no GPU here)."""
    wheels = ROOT / ".gpu-deps" / "wheels"
    if not list(wheels.glob("nvidia_cublas*.whl")):
        pytest.skip("NVIDIA wheels not fetched: bash scripts/gpu-compile-check.sh --fetch")
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("no nvcc")
    p = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-compile-check.sh")],
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert "gpu-compile-check: OK" in p.stdout


def test_info_counts_cuda_workers(monkeypatch):
    """`starchol info` gives a rank's default CPU workers as a run would: less the CUDA
    workers of the GPUs it sees (4 per GPU by default, or STARPU_NWORKER_PER_CUDA)."""
    from mpi4py import MPI

    from starchol.jobs.info_cmd import format_text, rank_facts
    from starchol.runtime.workers import affinity_cores

    monkeypatch.setenv("STARCHOL_RESERVE_MPI_CORE", "0")
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    cores = len(affinity_cores())
    monkeypatch.delenv("STARPU_NWORKER_PER_CUDA", raising=False)
    cpu = rank_facts(MPI.COMM_SELF, 256)
    assert cpu["gpus"] == 0 and cpu["cuda_workers_per_gpu"] == 0 and cpu["workers"] == cores
    monkeypatch.setenv("STARPU_NWORKER_PER_CUDA", "1")
    gpu = rank_facts(MPI.COMM_SELF, 256, gpus=1)
    assert gpu["cuda_workers_per_gpu"] == 1 and gpu["workers"] == max(1, cores - 1)
    facts = {"starchol": "x", "mpi": {"library": "m", "standard": "3.1", "mpi4py": "4",
                                      "ranks": 1},
             "starpu": {"version": "1.3.10", "kind": "k", "prefix": "/p", "library": "l",
                        "maxcpus": 256, "maxnodes": None, "fxt": False, "mpi": True,
                        "cuda": {"built": True, "devices": ["GPU 0"]},
                        "schedulers": ["prio"], "default_scheduler": "prio", "build": None},
             "kernel_blas": {"chosen": "b", "variable": "V", "request": "auto",
                             "core_variable": "C", "core_request": "auto"},
             "blas": [], "ranks": [dict(gpu, kernel_blas="b")]}
    text = format_text(facts)
    assert f"{gpu['workers']} CPU worker(s) and 1 GPU(s) x 1 CUDA worker(s) by default" in text
