"""The hostile suite's input files: one folder made once per session, read-only to the
cases (their sha256 is checked after each one)."""
import os
import socket
import stat

import h5py
import numpy as np

N = 64


def spd(n=N, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


def make_inputs(d):
    """Write every input of the table into the folder ``d`` (a str)."""
    a = spd()
    with h5py.File(f"{d}/good.h5", "w") as fh:
        fh["A"] = a
        fh["B"] = np.ones((N, 2))
        fh.create_group("G")
    raw = open(f"{d}/good.h5", "rb").read()
    open(f"{d}/trunc.h5", "wb").write(raw[:len(raw) // 2])
    open(f"{d}/text.h5", "w").write("this is not HDF5\n")
    open(f"{d}/empty.h5", "wb").close()
    bad = {"int": a.astype(np.int32), "rect": a[:, :32], "f16": a.astype(np.float16),
           "complex": a.astype(np.complex128), "cube": np.zeros((4, 4, 4)),
           "vector": np.ones(N), "zero": np.zeros((0, 0)),
           "asym": a + np.triu(np.ones((N, N)), 1), "lower": np.tril(a)}
    nan = a.copy()
    nan[5, 3] = nan[3, 5] = np.nan
    inf = a.copy()
    inf[7, 7] = np.inf
    bad.update(nan=nan, inf=inf)
    for name, value in bad.items():
        with h5py.File(f"{d}/{name}.h5", "w") as fh:
            fh["A"] = value
    with h5py.File(f"{d}/strings.h5", "w") as fh:
        fh["A"] = np.array([b"x"] * 4)
    with h5py.File(f"{d}/factor.h5", "w") as fh:
        fh["A"] = np.linalg.cholesky(a)
        fh["A"].attrs["content"] = "Cholesky factor L (lower triangle; zeros above)"
    with h5py.File(f"{d}/badattr.h5", "w") as fh:
        fh["A"] = a
        fh["A"].attrs["content"] = 7
    with h5py.File(f"{d}/gzip.h5", "w") as fh:        # compressed input: read as any
        fh.create_dataset("A", data=a, chunks=(16, 16), compression="gzip")
    with h5py.File(f"{d}/declared.h5", "w") as fh:     # 1e5 x 1e5 declared, nothing stored
        fh.create_dataset("A", shape=(100000, 100000), dtype="f8")
    with h5py.File(f"{d}/links.h5", "w") as fh:
        fh["missing_file"] = h5py.ExternalLink("no-such-file.h5", "/A")
        fh["missing_object"] = h5py.ExternalLink("good.h5", "/Z")
        fh["dangling"] = h5py.SoftLink("/nothing")
    os.mkfifo(f"{d}/fifo")
    os.mknod(f"{d}/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.mkfifo(f"{d}/pipe.npy")
    for name in ("sock", "sock.npy"):
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(f"{d}/{name}")
        sock.close()
    os.symlink("loop2", f"{d}/loop1")
    os.symlink("loop1", f"{d}/loop2")
    os.mkdir(f"{d}/folder")
    open(f"{d}/exists.json", "w").write('{"kept": true}\n')
    open(f"{d}/readonly.json", "w").write("{}\n")
    os.chmod(f"{d}/readonly.json", 0o444)
    np.save(f"{d}/map.npy", np.zeros((2, 2), dtype=np.int64))
    with h5py.File(f"{d}/rhs50.h5", "w") as fh:
        fh["B"] = np.ones((50, 2))
    open(f"{d}/notes.txt", "w").write("not a run document\n")
    # node descriptions (simulate --node): a good one and the hostile ones of issue 47
    import json

    speeds = dict.fromkeys(("potrf", "trsm", "syrk", "gemm", "add"), 10.0)
    good_node = {"name": "n", "workers": 2, "gflops": {"float64": speeds}}
    for name, doc in (("node-good", good_node),
                      ("node-gflops-list", {**good_node, "gflops": [1, 2]}),
                      ("node-gflops-word", {**good_node, "gflops": "fast"}),
                      ("node-workers-2^63", {**good_node, "workers": 2 ** 63}),
                      ("node-workers-1e9", {**good_node, "workers": 10 ** 9}),
                      ("node-speed-tiny", {**good_node, "gflops": {"float64": dict(
                          speeds, gemm=1e-308)}}),
                      ("node-latency-huge", {**good_node, "latency": 1e308})):
        with open(f"{d}/{name}.json", "w") as fh:
            json.dump(doc, fh)
    open(f"{d}/node-deep.json", "w").write("[" * 100000 + "]" * 100000)
    open(f"{d}/node-nan.json", "w").write('{"workers": NaN}')
    open(f"{d}/node-binary.json", "wb").write(bytes(range(256)))
    open(f"{d}/node-latin1.json", "wb").write('{"name": "caf\xe9"}'.encode("latin-1"))
    os.makedirs(f"{d}/sub", exist_ok=True)       # a link out of its folder
    os.symlink("../exists.json", f"{d}/sub/out.png")
    os.mkdir(f"{d}/trace-full")
    open(f"{d}/trace-full/run.json", "w").write("{}\n")
