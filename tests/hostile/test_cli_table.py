"""The hostile table, in process (fast): each row is a command line a user might try,
its exit status and the words of its one line. Every case also checks that the inputs
are unchanged (sha256 of every file, devices and links included), that nothing is left
behind in the case's folder; a case that hangs fails by its timeout. Rows whose status is 0 are the accepted
spellings next to the refused ones (``-`` for stdout, a compressed input, the largest
seed)."""
import os
import stat

import pytest

from .conftest import call_main, snapshot
from .data import make_inputs

#: seconds after which a case counts as hung (pytest-timeout; generous: the machine is
#: shared)
HANG_S = 60

RUN = ["run", "--dist", "2dbc", "--nb", "32"]
GOOD = "{d}/good.h5:/A"

# (id, argv, rc, words in the one line[, environment[, STARPU_HOME unset]]); {d}: the
# inputs' folder, {t}: the case's folder
CASES = [
    # -- point 5: outputs that are not regular files ------------------------------------
    ("run json dev-null", RUN + ["--n", "64", "--json", "/dev/null"], 2, "is a character device"),
    ("run json mknod", RUN + ["--n", "64", "--json", "{d}/null"], 2, "is a character device"),
    ("run json fifo", RUN + ["--n", "64", "--json", "{d}/fifo"], 2, "is a FIFO"),
    ("run json socket", RUN + ["--n", "64", "--json", "{d}/sock"], 2, "is a socket"),
    ("run json link loop", RUN + ["--n", "64", "--json", "{d}/loop1"], 2, "symbolic link loop"),
    ("run output link loop", RUN + ["--n", "64", "--output", "{d}/loop1:/L"], 2,
     "symbolic link loop"),
    ("run output fifo", RUN + ["--n", "64", "--output", "{d}/fifo:/L"], 2, "is a FIFO"),
    ("run output dev-null", RUN + ["--n", "64", "--output", "/dev/null:/L"], 2,
     "character device"),
    ("run gather fifo", RUN + ["--n", "64", "--gather", "{d}/pipe.npy"], 2, "is a FIFO"),
    ("run gather socket", RUN + ["--n", "64", "--gather", "{d}/sock.npy"], 2, "is a socket"),
    ("run solution fifo", RUN + ["--n", "64", "--nrhs", "1", "--solution", "{d}/fifo:/X"], 2,
     "is a FIFO"),
    ("map json dev-null", ["map", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--json",
                           "/dev/null"], 2, "is a character device"),
    ("map json fifo", ["map", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--json",
                       "{d}/fifo"], 2, "is a FIFO"),
    ("map png mknod", ["map", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--png",
                       "{d}/null"], 2, "is a character device"),
    ("map chameleon socket", ["map", "--dist", "sbc", "--nodes", "3", "--nt", "6",
                              "--chameleon", "{d}/sock"], 2, "is a socket"),
    ("volume json mknod", ["volume", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--json",
                           "{d}/null"], 2, "is a character device"),
    ("volume json fifo", ["volume", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--json",
                          "{d}/fifo"], 2, "is a FIFO"),
    ("volume json loop", ["volume", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--json",
                          "{d}/loop2"], 2, "symbolic link loop"),
    ("compare json dev-null", ["compare", "--nodes", "3", "--nt", "6", "--json", "/dev/null"],
     2, "is a character device"),
    ("plan json fifo", ["plan", "--nodes", "4", "--n", "1000", "--nb", "100",
                        "--memory-per-node", "64e9", "--json",
                        "{d}/fifo"], 2, "is a FIFO"),
    ("slurm -o dev-null", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb",
                           "100", "-o", "/dev/null"], 2, "is a character device"),
    ("slurm -o fifo", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb", "100",
                       "-o", "{d}/fifo"], 2, "is a FIFO"),
    ("slurm -o mknod", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb", "100",
                        "-o", "{d}/null"], 2, "is a character device"),
    ("generate output fifo", ["generate", "--n", "8", "--output", "{d}/fifo:/A"], 2,
     "is a FIFO"),
    ("generate output mknod", ["generate", "--n", "8", "--output", "{d}/null:/A"], 2,
     "is a character device"),
    ("generate output loop", ["generate", "--n", "8", "--output", "{d}/loop1:/A"], 2,
     "symbolic link loop"),
    ("report -o fifo", ["report", "--model", "--nodes-range", "2..4", "--n", "1000", "--nb",
                        "100", "-o", "{d}/fifo"], 2, "not a folder"),
    # '-' is standard output: accepted
    ("volume json stdout", ["volume", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--json",
                            "-"], 0, None),
    ("slurm -o stdout", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb",
                         "100", "-o", "-"], 0, None),
    # -- point 5: --json follows --output's overwrite rule ------------------------------
    ("run json exists", RUN + ["--n", "64", "--json", "{d}/exists.json"], 2,
     "exists; pass --overwrite"),
    ("run json onto hdf5", RUN + ["--n", "64", "--json", "{d}/gzip.h5"], 2,
     "exists; pass --overwrite"),
    ("volume json exists", ["volume", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--json",
                            "{d}/exists.json"], 2, "exists; pass --overwrite"),
    ("map json exists", ["map", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--json",
                         "{d}/exists.json"], 2, "exists; pass --overwrite"),
    ("compare json exists", ["compare", "--nodes", "3", "--nt", "6", "--json",
                             "{d}/exists.json"], 2, "exists; pass --overwrite"),
    ("plan json exists", ["plan", "--nodes", "4", "--n", "1000", "--nb", "100",
                          "--memory-per-node", "64e9", "--json",
                          "{d}/exists.json"], 2, "exists; pass --overwrite"),
    ("bench json exists", ["bench", "--n", "64", "--nb", "32", "--json", "{d}/exists.json"],
     2, "exists; pass --overwrite"),
    ("volume json read-only", ["volume", "--dist", "sbc", "--nodes", "3", "--nt", "6",
                               "--json", "{d}/readonly.json", "--overwrite"], 2,
     "is read-only"),
    # -- point 5: sizes refused from arithmetic, at once --------------------------------
    ("volume nodes 1e6", ["volume", "--dist", "2dbc", "--nodes", "1000000", "--nt", "10"], 2,
     "the largest node count that fits is"),
    ("volume nodes 1e8", ["volume", "--dist", "sym", "--nodes", "100000000", "--nt", "10"], 2,
     "the largest node count that fits is"),
    ("compare nodes 1e6", ["compare", "--nodes", "1000000", "--nt", "10"], 2,
     "the largest node count that fits is"),
    ("compare nodes 1e8", ["compare", "--nodes", "100000000", "--nt", "10"], 2,
     "the largest node count that fits is"),
    ("report nodes-range 1e6", ["report", "--model", "--nodes-range", "2..1000000", "--n",
                                "1000", "--nb", "100", "-o", "{t}/r"], 2,
     "the largest node count that fits is"),
    ("run n 1e7 nb 2000", RUN[:3] + ["--n", "10000000", "--nb", "2000"], 2,
     "not enough memory"),
    ("run n 1e7 nb 500", RUN[:3] + ["--n", "10000000", "--nb", "500"], 2, "not enough memory"),
    ("run input declared 1e5", RUN + ["--input", "{d}/declared.h5:/A", "--nb", "2000"], 2,
     "not enough memory"),
    ("map nt huge", ["map", "--dist", "sbc", "--nodes", "3", "--nt", "1000000"], 2,
     "owner table"),
    ("generate n 1e7", ["generate", "--n", "10000000", "--output", "{t}/big.h5:/A"], 2,
     "of disk"),
    # -- point 5: the trace folder and the JSON on one path -----------------------------
    ("run trace == json", RUN + ["--n", "64", "--trace", "{t}/tr", "--json", "{t}/tr"], 2,
     "is also the --json file"),
    ("run trace is a file", RUN + ["--n", "64", "--trace", "{d}/exists.json"], 2,
     "is not a folder"),
    # -- point 5: broken links, bad HDF5 files ------------------------------------------
    ("run input link to missing file", RUN + ["--input", "{d}/links.h5:/missing_file"], 2,
     "is an external link to no-such-file.h5:/A"),
    ("run input link to missing object", RUN + ["--input", "{d}/links.h5:/missing_object"], 2,
     "is an external link to good.h5:/Z"),
    ("run input dangling soft link", RUN + ["--input", "{d}/links.h5:/dangling"], 2,
     "is a soft link to /nothing"),
    ("run input truncated", RUN + ["--input", "{d}/trunc.h5:/A"], 2,
     "cannot be opened by HDF5"),
    ("run input text", RUN + ["--input", "{d}/text.h5:/A"], 2, "is not an HDF5 file"),
    ("run input empty file", RUN + ["--input", "{d}/empty.h5:/A"], 2, "is not an HDF5 file"),
    ("run input missing", RUN + ["--input", "{d}/none.h5:/A"], 2, "not found"),
    ("run input folder", RUN + ["--input", "{d}/folder:/A"], 2, "is a folder"),
    ("run input fifo", RUN + ["--input", "{d}/fifo:/A"], 2, "is a FIFO"),
    ("run input dev-null", RUN + ["--input", "/dev/null:/A"], 2, "is a character device"),
    ("run input loop", RUN + ["--input", "{d}/loop1:/A"], 2, "symbolic link loop"),
    ("run input no dataset", RUN + ["--input", "{d}/good.h5:/Z"], 2, "not found in"),
    ("run input group", RUN + ["--input", "{d}/good.h5:/G"], 2, "is a group"),
    ("run input int32", RUN + ["--input", "{d}/int.h5:/A"], 2, "has dtype int32"),
    ("run input float16", RUN + ["--input", "{d}/f16.h5:/A"], 2, "has dtype float16"),
    ("run input complex", RUN + ["--input", "{d}/complex.h5:/A"], 2, "has dtype complex128"),
    ("run input strings", RUN + ["--input", "{d}/strings.h5:/A"], 2, "square"),
    ("run input rectangular", RUN + ["--input", "{d}/rect.h5:/A"], 2, "must be a square"),
    ("run input 3-D", RUN + ["--input", "{d}/cube.h5:/A"], 2, "must be a square"),
    ("run input vector", RUN + ["--input", "{d}/vector.h5:/A"], 2, "must be a square"),
    ("run input 0 x 0", RUN + ["--input", "{d}/zero.h5:/A"], 2, "is empty"),
    ("run input is a factor", RUN + ["--input", "{d}/factor.h5:/A"], 2,
     "holds a Cholesky factor"),
    ("run input attribute not text", RUN + ["--input", "{d}/badattr.h5:/A"], 2,
     "holds a number"),
    ("run input no dataset part", RUN + ["--input", "{d}/good.h5"], 2,
     "must look like FILE.h5:/DATASET"),
    ("run input n disagrees", RUN + ["--input", GOOD, "--n", "50"], 2, "64"),
    ("run input with matrix", RUN + ["--input", GOOD, "--matrix", "indefinite:3"], 2,
     "cannot be combined with --input"),
    ("run rhs wrong rows", RUN + ["--input", GOOD, "--rhs", "{d}/rhs50.h5:/B"], 2,
     "has 50 rows but the matrix has 64"),
    ("run rhs link", RUN + ["--input", GOOD, "--rhs", "{d}/links.h5:/missing_file"], 2,
     "external link"),
    ("generate onto truncated", ["generate", "--n", "8", "--output", "{d}/trunc.h5:/B"], 2,
     "cannot be opened by HDF5"),
    ("generate onto text", ["generate", "--n", "8", "--output", "{d}/text.h5:/B"], 2,
     "not an HDF5 file"),
    ("generate onto dataset", ["generate", "--n", "8", "--output", "{d}/good.h5:/A"], 2,
     "already exists"),
    ("generate under a dataset", ["generate", "--n", "8", "--output", "{d}/good.h5:/A/X"], 2,
     "cannot hold"),
    ("generate onto group", ["generate", "--n", "8", "--output", "{d}/good.h5:/G"], 2,
     "is a group"),
    # -- point 5: one seed rule ---------------------------------------------------------
    ("generate seed 2^64", ["generate", "--n", "8", "--seed", str(2**64), "--output",
                            "{t}/s.h5:/A"], 2, "out of range"),
    ("run seed 2^64", RUN + ["--n", "64", "--seed", str(2**64)], 2, "out of range"),
    ("generate seed -1", ["generate", "--n", "8", "--seed", "-1", "--output", "{t}/s.h5:/A"],
     2, "out of range"),
    ("bench seed word", ["bench", "--n", "64", "--nb", "32", "--seed", "x"], 2, "invalid seed"),
    ("slurm seed 2^70", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb",
                         "100", "--seed", str(2**70)], 2, "out of range"),
    # -- point 5: conflicting options ---------------------------------------------------
    ("run cache on with no-cache", RUN + ["--n", "64", "--cache", "on", "--no-cache"], 2,
     "contradict each other"),
    ("slurm dist vs run-arg dist", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000",
                                    "--nb", "100", "--run-arg=--dist=2dbc"], 2,
     "sets --dist, which the script already sets (--dist sbc)"),
    ("slurm n vs run-arg n", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000",
                              "--nb", "100", "--run-arg=--n=2000"], 2, "sets --n,"),
    ("slurm json vs run-arg json", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000",
                                    "--nb", "100", "--run-arg=--json=x.json"], 2,
     "sets --json"),
    ("run rhs and nrhs", RUN + ["--input", GOOD, "--rhs", "{d}/good.h5:/B", "--nrhs", "2"], 2,
     "give the right-hand sides once"),
    ("run map-file without custom", RUN + ["--n", "64", "--map-file", "{d}/map.npy"], 2,
     "--map-file applies to --dist custom"),
    ("run grid with sbc", ["run", "--dist", "sbc", "--nb", "32", "--n", "64", "--grid", "1x1"],
     2, "--grid applies to 2dbc"),
    ("run overwrite alone", RUN + ["--n", "64", "--overwrite"], 2, "--overwrite applies to"),
    ("run solution without rhs", RUN + ["--n", "64", "--solution", "{t}/x.h5:/X"], 2,
     "give the right-hand sides"),
    # -- outputs that clash with inputs or each other -----------------------------------
    ("run json onto input", RUN + ["--input", GOOD, "--json", "{d}/good.h5", "--overwrite"],
     2, "never modifies its input"),
    ("run output onto input", RUN + ["--input", GOOD, "--output", "{d}/good.h5:/L"], 2,
     "is the input file"),
    ("run gather onto json", RUN + ["--n", "64", "--json", "{t}/r.npy", "--gather",
                                    "{t}/r.npy"], 2, "is also the --json file"),
    ("run json to missing folder", RUN + ["--n", "64", "--json", "{t}/no/r.json"], 2,
     "does not exist"),
    ("run json to a folder", RUN + ["--n", "64", "--json", "{d}/folder"], 2, "is a folder"),
    ("run output under /proc", RUN + ["--n", "64", "--output", "/proc/x.h5:/L"], 2,
     "--output"),
    ("map json onto map-file", ["map", "--dist", "custom", "--map-file", "{d}/map.npy",
                                "--nt", "4", "--json", "{d}/map.npy", "--overwrite"], 2,
     "never modifies its input"),
    # -- options of every subcommand ----------------------------------------------------
    ("run unknown option", RUN + ["--n", "64", "--bogus"], 2, "unrecognized arguments"),
    ("run nodes", RUN + ["--n", "64", "--nodes", "4"], 2, "mpirun -np"),
    ("run n 1e4", RUN + ["--n", "1e4"], 2, "write it as an integer: 10000"),
    ("run n 0", RUN + ["--n", "0"], 2, "n"),
    ("run n -5", RUN + ["--n", "-5"], 2, "n"),
    ("run nb 0", ["run", "--dist", "2dbc", "--n", "64", "--nb", "0"], 2, "nb"),
    ("run no n", RUN, 2, "give the matrix"),
    ("run dist bogus", ["run", "--dist", "bogus", "--n", "64", "--nb", "32"], 2,
     "invalid choice"),
    ("run sched bogus", RUN + ["--n", "64", "--sched", "bogus"], 2, "bogus"),
    ("run workers 0", RUN + ["--n", "64", "--workers", "0"], 2, "workers"),
    ("run gpus -1", RUN + ["--n", "64", "--gpus", "-1"], 2, "gpus"),
    ("run slices 0", ["run", "--dist", "sbc25d", "--nb", "32", "--n", "64", "--slices", "0"],
     2, "argument --slices: must be an integer >= 1"),
    ("run slices with 2dbc", RUN + ["--n", "64", "--slices", "2"], 2, "--slices applies to"),
    ("run symmetry-tol nan", RUN + ["--input", GOOD, "--symmetry-tol", "nan"], 2,
     "--symmetry-tol must be a finite number"),
    ("run matrix bogus", RUN + ["--n", "64", "--matrix", "bogus"], 2, "bogus"),
    ("run indefinite out of range", RUN + ["--n", "64", "--matrix", "indefinite:99"], 2,
     "indefinite:99"),
    ("run nrhs 0", RUN + ["--n", "64", "--nrhs", "0"], 2,
     "argument --nrhs: must be an integer >= 1, got '0'"),
    ("run dtype float16", RUN + ["--n", "64", "--dtype", "float16"], 2, "invalid choice"),
    ("generate no output", ["generate", "--n", "8"], 2, "required"),
    ("generate n 0", ["generate", "--n", "0", "--output", "{t}/g.h5:/A"], 2,
     "argument --n: must be an integer >= 1"),
    ("generate kind bogus", ["generate", "--n", "8", "--kind", "x", "--output",
                             "{t}/g.h5:/A"], 2, "unknown --kind"),
    ("generate no dataset", ["generate", "--n", "8", "--output", "{t}/g.h5"], 2,
     "must look like FILE.h5:/DATASET"),
    ("generate empty dataset", ["generate", "--n", "8", "--output", "{t}/g.h5:/"], 2,
     "must look like FILE.h5:/DATASET"),
    ("map nodes 0", ["map", "--dist", "2dbc", "--nodes", "0", "--nt", "4"], 2, "nodes"),
    ("map nt 0", ["map", "--dist", "sbc", "--nodes", "3", "--nt", "0"], 2,
     "argument --nt: must be an integer >= 1"),
    ("map sbc on 4 nodes", ["map", "--dist", "sbc", "--nodes", "4", "--nt", "4"], 2,
     "--nodes 3"),
    ("map grid mismatch", ["map", "--dist", "2dbc", "--nodes", "4", "--grid", "3x3", "--nt",
                           "4"], 2, "grid"),
    ("map custom no file", ["map", "--dist", "custom", "--nt", "4"], 2, "--map-file"),
    ("map custom folder", ["map", "--dist", "custom", "--map-file", "{d}/folder", "--nt",
                           "4"], 2, "is a folder"),
    ("map custom missing", ["map", "--dist", "custom", "--map-file", "{d}/none.txt", "--nt",
                            "4"], 2, "not found"),
    ("volume no size", ["volume", "--dist", "sbc", "--nodes", "3"], 2, "nt"),
    ("volume nrhs 0", ["volume", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--nrhs", "0"],
     2, "argument --nrhs: must be an integer >= 1, got '0'"),
    ("volume cache bogus", ["volume", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--cache",
                            "maybe"], 2, "invalid choice"),
    ("compare nodes 0", ["compare", "--nodes", "0", "--nt", "6"], 2, "nodes"),
    ("plan memory nan", ["plan", "--nodes", "4", "--n", "1000", "--nb", "100",
                         "--memory-per-node", "nan"], 2, "memory-per-node"),
    ("plan nodes 0", ["plan", "--nodes", "0", "--n", "1000", "--nb", "100",
                      "--memory-per-node", "64e9"], 2, "nodes"),
    ("report nothing", ["report", "-o", "{t}/r"], 2, "give one or more run JSON files"),
    ("report not a document", ["report", "{d}/notes.txt", "-o", "{t}/r"], 2, "notes.txt"),
    ("report missing document", ["report", "{d}/none.json", "-o", "{t}/r"], 2, "none.json"),
    ("report model and runs", ["report", "--model", "{d}/exists.json", "-o", "{t}/r"], 2,
     "not both"),
    ("report bad range", ["report", "--model", "--nodes-range", "5..2", "--n", "1000", "--nb",
                          "100", "-o", "{t}/r"], 2, "nodes-range"),
    ("slurm nodes 1e8", ["slurm", "--dist", "2dbc", "--nodes", "100000000", "--n", "1000",
                         "--nb", "100"], 2, "nodes"),
    ("slurm time huge", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb",
                         "100", "--time", "1000000-00:00:00"], 2, "time"),
    ("slurm sched bogus", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb",
                           "100", "--sched", "bogus"], 2, "bogus"),
    ("slurm -o folder", ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb",
                         "100", "-o", "{d}/folder"], 2, "is a folder"),
    ("bench n 0", ["bench", "--n", "0", "--nb", "32"], 2, "n"),
    ("bench repeat 0", ["bench", "--n", "64", "--nb", "32", "--repeat", "0"], 2, "repeat"),
    ("top-level unknown command", ["frobnicate"], 2, "invalid choice"),
    ("seed at the top of the range", ["generate", "--n", "8", "--seed", str(2**64 - 1),
                                      "--output", "{t}/s.h5:/A"], 0, None),
    ("info json dev-null", ["info", "--json", "/dev/null"], 2, "is a character device"),
    ("info json exists", ["info", "--json", "{d}/exists.json"], 2, "exists; pass --overwrite"),
    ("bench json fifo", ["bench", "--n", "64", "--nb", "32", "--json", "{d}/fifo"], 2,
     "is a FIFO"),
    ("report document fifo", ["report", "{d}/fifo", "-o", "{t}/r"], 2, "fifo"),
    ("map map-file fifo", ["map", "--dist", "custom", "--map-file", "{d}/fifo", "--nt", "4"],
     2, "is a FIFO"),
    ("run map-file fifo", ["run", "--dist", "custom", "--map-file", "{d}/fifo", "--n", "64",
                           "--nb", "32"], 2, "is a FIFO"),
    ("slurm input fifo", ["slurm", "--dist", "sbc", "--nodes", "6", "--nb", "100", "--input",
                          "{d}/fifo:/A"], 2, "is a FIFO"),
    ("report document folder", ["report", "{d}/folder", "-o", "{t}/r"], 2, "folder"),
    ("report -o onto a file", ["report", "--model", "--nodes-range", "2..4", "--n", "1000",
                               "--nb", "100", "-o", "{d}/exists.json"], 2, "not a folder"),
    ("slurm sweep -o onto a file", ["slurm", "--sweep", "--dist", "sbc,2dbc", "--nodes", "6",
                                    "--n", "1000", "--nb", "100", "-o", "{d}/exists.json"], 2,
     "not a folder"),
    # -- environment variables (run's pre-flight, before StarPU starts) -----------------
    ("env STARPU_HOME=/", RUN + ["--n", "64"], 2, "STARPU_HOME=/ is the file system root",
     {"STARPU_HOME": "/"}),
    ("env STARPU_PERF_MODEL_DIR=/", RUN + ["--n", "64"], 2, "is the file system root",
     {"STARPU_PERF_MODEL_DIR": "/"}),
    ("env STARPU_HOME a file", RUN + ["--n", "64"], 2, "is not a folder",
     {"STARPU_HOME": "{d}/exists.json"}),
    ("env STARPU_HOME empty", RUN + ["--n", "64"], 2, "STARPU_HOME is empty",
     {"STARPU_HOME": ""}),
    ("env STARPU_HOME missing root", RUN + ["--n", "64"], 2, "does not exist",
     {"STARPU_HOME": "/nonexistent-starchol/x"}),
    ("env HOME /proc", RUN + ["--n", "64"], 2, "not writable", {"HOME": "/proc"}, True),
    ("env STARPU_NCPU -1", RUN + ["--n", "64"], 2, "STARPU_NCPU='-1' must be >= 0",
     {"STARPU_NCPU": "-1"}),
    ("env STARPU_NCPU word", RUN + ["--n", "64"], 2, "must be a non-negative integer",
     {"STARPU_NCPU": "four"}),
    ("env STARPU_SCHED bogus", RUN + ["--n", "64"], 2, "not a StarPU scheduling policy",
     {"STARPU_SCHED": "bogus"}),
    ("env NDETACHED_SEND 0", RUN + ["--n", "64"], 2, "must be >= 1",
     {"STARPU_MPI_NDETACHED_SEND": "0"}),
    ("env NWORKER_PER_CUDA 0", RUN + ["--n", "64"], 2, "must be >= 1",
     {"STARPU_NWORKER_PER_CUDA": "0"}),
    ("env WORKERS_CPUID abc", RUN + ["--n", "64"], 2, "STARPU_WORKERS_CPUID='abc' must list",
     {"STARPU_WORKERS_CPUID": "abc"}),
    ("env HOME / without STARPU_HOME", RUN + ["--n", "64"], 2, "would write its samplings "
     "in /.starpu", {"HOME": "/"}, True),
    ("env launcher size 2 generate", ["generate", "--n", "8", "--output", "{t}/g.h5:/A"], 2,
     "started as 2 processes", {"PMI_SIZE": "2"}),
    ("env launcher size 2 simulate", ["simulate", "--dist", "sbc", "--nodes", "3", "--nt",
                                      "6"], 2, "started as 2 processes",
     {"OMPI_COMM_WORLD_SIZE": "2"}),
    ("simulate json fifo", ["simulate", "--dist", "sbc", "--nodes", "3", "--nt", "6",
                            "--node-gflops", "10", "--cores", "2",
                            "--json", "{d}/fifo"], 2, "is a FIFO"),
    ("env launcher size 4 volume", ["volume", "--dist", "sbc", "--nodes", "3", "--nt", "6"],
     2, "started as 4 processes", {"OMPI_COMM_WORLD_SIZE": "4"}),
]

SIM = ["simulate", "--dist", "sbc", "--nodes", "3", "--nt", "6"]
NODE = ["--node", "{d}/node-good.json"]
SLURM = ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb", "100"]
# -- issue 47: every command as safe as run -------------------------------------------
CASES += [
    # High 2: sizes refused before any work, naming the need and how to lower it
    ("simulate nt 1000", ["simulate", "--dist", "sbc", "--nodes", "6", "--nt", "1000",
                          *NODE], 2, "use a smaller NT"),
    ("simulate nodes 1e8", ["simulate", "--dist", "2dbc", "--nodes", "100000000", "--nt",
                            "10", *NODE], 2, "fewer nodes"),
    ("simulate nodes 5050", ["simulate", "--dist", "sbc", "--nodes", "5050", "--nt", "10",
                             *NODE], 2, "of memory"),
    ("simulate workers 1e9 in the node file", SIM + ["--node", "{d}/node-workers-1e9.json"],
     2, "workers must be an integer from 1 to"),
    ("simulate cores 2^63", SIM + NODE + ["--cores", str(2 ** 63)], 2,
     "argument --cores: must be an integer from 1 to"),
    ("simulate sends-in-flight 2^63", SIM + NODE + ["--sends-in-flight", str(2 ** 63)], 2,
     "argument --sends-in-flight"),
    ("plan simulate n 2000 nb 1", ["plan", "--simulate", "--nodes", "4", "--n", "2000",
                                   "--nb", "1", "--node", "{d}/node-good.json",
                                   "--memory-per-node", "64e9"], 2, "use a smaller NT"),
    ("report simulate nodes-range 1e6", ["report", "--simulate", "--nodes-range",
                                         "2..1000000", "--n", "1000", "--nb", "100",
                                         "--node", "{d}/node-good.json", "--bandwidth",
                                         "10Gbit", "-o", "{t}/r"], 2,
     "the largest node count that fits is"),
    ("report simulate 2000 node counts", ["report", "--simulate", "--nodes-range", "2..2000",
                                          "--n", "1000", "--nb", "100", "--node",
                                          "{d}/node-good.json", "--bandwidth", "10Gbit",
                                          "-o", "{t}/r"], 2, "the limit is 1000 node counts"),
    ("calibrate ranks 1000", ["calibrate", "--nb", "64", "--ranks", "1000", "-o",
                              "{t}/c.json"], 2, "lower --ranks or --workers"),
    ("calibrate workers 1e6", ["calibrate", "--nb", "64", "--method", "fork", "--workers",
                               "1000000", "-o", "{t}/c.json"], 2, "the limit is"),
    ("calibrate nb 1e5", ["calibrate", "--nb", "100000", "--workers", "1", "-o",
                          "{t}/c.json"], 2, "use a smaller --nb"),
    # High 3 / Medium: outputs through the shared path
    ("simulate gantt onto node", SIM + ["--node", "{d}/node-good.json", "--gantt",
                                        "{d}/node-good.json"], 2, "is the input file"),
    ("simulate gantt onto map-file", ["simulate", "--dist", "custom", "--map-file",
                                      "{d}/map.npy", "--nt", "4", *NODE, "--gantt",
                                      "{d}/map.npy"], 2, "is the input file"),
    ("simulate gantt existing", SIM + NODE + ["--gantt", "{d}/exists.json"], 2,
     "exists; pass --overwrite"),
    ("simulate gantt link out", SIM + NODE + ["--gantt", "{d}/sub/out.png"], 2,
     "outside its folder"),
    ("simulate json onto node overwrite", SIM + ["--node", "{d}/node-good.json", "--json",
                                                 "{d}/./node-good.json", "--overwrite"], 2,
     "never modifies its input"),
    ("simulate gantt == json", SIM + NODE + ["--gantt", "{t}/x", "--json", "{t}/x"], 2,
     "two results cannot share one file"),
    ("map png existing", ["map", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--png",
                          "{d}/exists.json"], 2, "exists; pass --overwrite"),
    ("map chameleon existing", ["map", "--dist", "sbc", "--nodes", "3", "--nt", "6",
                                "--chameleon", "{d}/exists.json"], 2,
     "exists; pass --overwrite"),
    ("calibrate -o existing", ["calibrate", "--nb", "64", "--method", "fork", "--workers",
                               "1", "-o", "{d}/exists.json"], 2, "exists; pass --overwrite"),
    ("slurm -o existing", SLURM + ["-o", "{d}/exists.json"], 2, "exists; pass --overwrite"),
    ("report -o holds files", ["report", "--model", "--nodes-range", "2..4", "--n", "1000",
                               "--nb", "100", "-o", "{d}/trace-full"], 2,
     "is a folder that holds files"),
    ("run trace holds files", RUN + ["--n", "64", "--trace", "{d}/trace-full"], 2,
     "is a folder that holds files"),
    ("run trace dot", RUN + ["--n", "64", "--trace", "{d}"], 2,
     "is a folder that holds files"),
    ("run gather dev-null", RUN + ["--n", "64", "--gather", "/dev/null"], 2,
     "is a character device"),
    # High 4 / Medium: readable inputs, decoded errors as usage errors
    ("simulate node fifo", SIM + ["--node", "{d}/fifo"], 2, "is a FIFO"),
    ("simulate node dev-zero", SIM + ["--node", "/dev/zero"], 2, "character device"),
    ("simulate node gflops list", SIM + ["--node", "{d}/node-gflops-list.json"], 2,
     "gflops must be an object"),
    ("simulate node gflops word", SIM + ["--node", "{d}/node-gflops-word.json"], 2,
     "gflops must be an object"),
    ("simulate node deep", SIM + ["--node", "{d}/node-deep.json"], 2, "nested more than"),
    ("simulate node NaN", SIM + ["--node", "{d}/node-nan.json"], 2, "NaN is not a number"),
    ("simulate node binary", SIM + ["--node", "{d}/node-binary.json"], 2, "binary file"),
    ("simulate node latin-1", SIM + ["--node", "{d}/node-latin1.json"], 2, "not UTF-8"),
    ("simulate node workers 2^63", SIM + ["--node", "{d}/node-workers-2^63.json"], 2,
     "workers must be an integer from 1 to"),
    ("simulate node speed 1e-308", SIM + ["--node", "{d}/node-speed-tiny.json"], 2,
     "GFlop/s per worker"),
    ("simulate node latency 1e308", SIM + ["--node", "{d}/node-latency-huge.json"], 2,
     "a day"),
    ("simulate latency 1e308", SIM + NODE + ["--latency", "1e308s"], 2, "a day"),
    ("simulate bandwidth empty", SIM + NODE + ["--bandwidth", ""], 2, "cannot read ''"),
    ("plan node fifo", ["plan", "--simulate", "--nodes", "4", "--n", "1000", "--nb", "100",
                        "--memory-per-node", "64e9", "--node", "{d}/fifo"], 2, "is a FIFO"),
    ("report node dev-zero", ["report", "--simulate", "--nodes-range", "2..3", "--n", "1000",
                              "--nb", "100", "--node", "/dev/zero", "-o", "{t}/r"], 2,
     "character device"),
    # High 6 / Low: Slurm script text from any path
    ("slurm input newline", ["slurm", "--dist", "sbc", "--nodes", "6", "--nb", "100",
                             "--input", "in\ntouch /tmp/X #.h5:/A"], 2,
     "control character"),
    ("slurm sweep -o newline", ["slurm", "--sweep", "--dist", "sbc,2dbc", "--nodes", "6",
                                "--n", "1000", "--nb", "100", "-o", "{t}/a\nb"], 2,
     "control character"),
    ("slurm setup NUL", SLURM + ["--setup", "module load x\0"], 2, "control character"),
    ("slurm job-name escape", SLURM + ["--job-name", "a\x1b[2J"], 2, "control character"),
    ("slurm sbatch-option shell", SLURM + ["--sbatch-option", "--exclusive; touch x"], 2,
     "no shell code"),
    ("slurm sbatch-option backquote", SLURM + ["--sbatch-option=--comment=`id`"], 2,
     "no shell code"),
    ("slurm sweep empty dist item", ["slurm", "--sweep", "--dist", "sbc,,2dbc", "--nodes",
                                     "6", "--n", "1000", "--nb", "100", "-o", "{t}/s"], 2,
     "has an empty item"),
]

#: files a case with status 0 leaves, by id (relative to its folder)
LEAVES = {"seed at the top of the range": {"s.h5"}}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile-inputs")
    make_inputs(str(d))
    return str(d)


@pytest.mark.timeout(HANG_S)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hostile_case(case, inputs, tmp_path, monkeypatch):
    name, argv, rc, words, env, unset_home = (*case, {}, False)[:6]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STARPU_SILENT", "1")
    if unset_home:
        monkeypatch.delenv("STARPU_HOME", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value.format(d=inputs))
    argv = [a.format(d=inputs, t=tmp_path) for a in argv]
    before = snapshot(inputs)
    null = os.stat("/dev/null")
    status, out, err = call_main(argv)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == rc, (status, err)
    if rc:
        from starchol.cli import build_parser

        command = argv[0] if argv[0] in build_parser().command_parsers else ""
        assert len(lines) == 1, err
        assert lines[0].startswith(f"starchol {command}".rstrip() + ": error: " if command
                                   else "starchol: error: "), err
        assert words in lines[0], err
        assert "Traceback" not in err
    assert snapshot(inputs) == before               # inputs, devices, links unchanged
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert os.stat("/dev/null").st_rdev == null.st_rdev
    left = set(os.listdir(tmp_path))
    assert left == LEAVES.get(name, set()), left    # nothing left behind


def test_a_run_that_lost_its_factor_keeps_its_document_aside(tmp_path):
    """Two runs on one --output and --json: the one whose factor was kept aside (another
    run published it) keeps its run document aside too, even when it reaches the JSON
    name first; the other names stay the winner's."""
    from starchol.files import OutputAppeared
    from starchol.jobs.output import publish_json

    path = tmp_path / "r.json"
    with pytest.raises(OutputAppeared, match="was not written because its factor") as info:
        publish_json(str(path), {"n": 1}, None, False, aside="its factor was kept aside")
    assert not path.exists() and os.path.basename(info.value.kept).startswith("r.starchol-")
    assert open(info.value.kept).read() == '{\n "n": 1\n}\n'
    assert publish_json(str(path), {"n": 2}, None, False) == str(path)
    with pytest.raises(OutputAppeared, match="appeared while this run was working"):
        publish_json(str(path), {"n": 3}, None, False)      # the name was taken meanwhile
    assert "r.json" in os.listdir(tmp_path) and len(os.listdir(tmp_path)) == 3  # none lost
