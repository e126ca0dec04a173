"""HDF5 input/output of tiled matrices (one process) and ``starchol generate``."""

import h5py
import numpy as np
import pytest
from conftest import sha256_file

from starchol import UsageError
from starchol.cli import flag_message, main
from starchol.linalg import matrices
from starchol.linalg.hdf5_io import (FactorWriter, inspect_input, parse_target, read_tiles,
                                     write_matrix)
from starchol.distributions import get_map
from starchol.linalg.distributed import DistributedMatrix


def tiled(n, nb):
    """An empty one-rank symmetric matrix (what read_tiles fills)."""
    from mpi4py import MPI

    return DistributedMatrix((n, n), nb, get_map("2dbc", 1), comm=MPI.COMM_SELF)


def test_parse_target():
    assert parse_target("a.h5:/A") == ("a.h5", "/A")
    assert parse_target("dir/a.h5:grp/A") == ("dir/a.h5", "/grp/A")
    for bad in ("a.h5", "a.h5:", ":/A", ""):
        with pytest.raises(UsageError, match="FILE.h5:/DATASET"):
            parse_target(bad)


def test_generate_then_read_round_trip(tmp_path):
    f = tmp_path / "a.h5"
    assert main(["generate", "--n", "130", "--output", f"{f}:/A", "--seed", "3"]) == 0
    n, dtype = inspect_input(str(f), "/A")
    assert (n, dtype) == (130, "float64")
    a = tiled(130, 32)
    info = read_tiles(str(f), "/A", a, symmetry_tol=1e-12)
    assert info["relative_asymmetry"] == 0.0
    dense = matrices.dense(matrices.MatrixSpec(), 130, 3)
    np.testing.assert_array_equal(a.gather(), np.tril(dense))
    assert all(t.flags.f_contiguous for t in a.tiles.values())


def test_generate_float32_is_the_float64_matrix_rounded(tmp_path, capsys):
    f = tmp_path / "a.h5"
    assert main(["generate", "--n", "70", "--output", f"{f}:/A", "--seed", "3",
                 "--dtype", "float32"]) == 0
    assert "(seed 3, float32)" in capsys.readouterr().out
    assert inspect_input(str(f), "/A") == (70, "float32")
    with h5py.File(f, "r") as fh:
        stored = fh["A"][...]
    dense = matrices.dense(matrices.MatrixSpec(), 70, 3)
    np.testing.assert_array_equal(stored, (np.tril(dense) + np.tril(dense, -1).T)
                                  .astype(np.float32))


def test_float32_is_upcast(tmp_path):
    f = tmp_path / "a.h5"
    m = np.eye(10, dtype=np.float32) * 3
    with h5py.File(f, "w") as fh:
        fh["A"] = m
    a = tiled(10, 4)
    assert read_tiles(str(f), "/A", a)["dtype"] == "float32"
    assert a.tiles[(0, 0)].dtype == np.float64


@pytest.mark.parametrize("content,words", [
    (None, "not found"),
    (np.zeros((4, 5)), "square"),
    (np.zeros((4, 4), dtype=np.int32), "dtype int32"),
    (np.zeros(4), "square"),
])
def test_bad_input_files(tmp_path, content, words):
    f = tmp_path / "bad.h5"
    if content is not None:
        with h5py.File(f, "w") as fh:
            fh["A"] = content
    with pytest.raises(UsageError, match=words):
        inspect_input(str(f), "/A")


def test_missing_dataset_lists_what_is_there(tmp_path):
    f = tmp_path / "a.h5"
    with h5py.File(f, "w") as fh:
        fh["B"] = np.eye(3)
    with pytest.raises(UsageError, match=r"dataset '/A' not found.*datasets in the file: /B"):
        inspect_input(str(f), "/A")
    (tmp_path / "t.h5").write_text("not hdf5")
    with pytest.raises(UsageError, match="not an HDF5 file"):
        inspect_input(str(tmp_path / "t.h5"), "/A")


def test_non_finite_and_non_symmetric_are_refused(tmp_path):
    f = tmp_path / "a.h5"
    m = np.eye(8) * 4
    m[6, 2] = m[2, 6] = np.nan
    with h5py.File(f, "w") as fh:
        fh["A"] = m
    with pytest.raises(UsageError, match="non-finite value.*row 6, column 2"):
        read_tiles(str(f), "/A", tiled(8, 3))
    m = np.eye(8) * 4
    m[5, 1] = 1.0
    with h5py.File(f, "w") as fh:
        fh["A"] = m
    # nothing above the diagonal: a lower triangle stored alone (a factor, or half a matrix)
    with pytest.raises(UsageError, match=r"holds a lower triangle only .* mirror it first"):
        read_tiles(str(f), "/A", tiled(8, 3))
    m[7, 0] = m[0, 7] = 1.0
    with h5py.File(f, "w") as fh:
        fh["A"] = m
    with pytest.raises(UsageError, match=r"not symmetric.*2\.500e-01.*raise symmetry_tol\)$") \
            as info:
        read_tiles(str(f), "/A", tiled(8, 3))
    assert flag_message(info.value).endswith("raise --symmetry-tol)")


def test_values_beyond_float32_are_refused_when_read_as_float32(tmp_path):
    # finite in the file, Inf once converted: refused, not passed on as Inf
    f = tmp_path / "a.h5"
    with h5py.File(f, "w") as fh:
        fh["A"] = np.eye(6) * 1e39
    from mpi4py import MPI

    t32 = DistributedMatrix((6, 6), 4, get_map("2dbc", 1), dtype=np.float32,
                            comm=MPI.COMM_SELF)
    with pytest.raises(UsageError, match=r"values up to 1\.000e\+39, beyond float32's "
                                         r"largest \(3\.403e\+38\); read it as float64"):
        read_tiles(str(f), "/A", t32)
    assert read_tiles(str(f), "/A", tiled(6, 4))["max_abs"] == 1e39


def test_factor_writer_is_atomic_and_keeps_other_data(tmp_path):
    out = tmp_path / "l.h5"
    with h5py.File(out, "w") as fh:
        fh["keep"] = np.arange(3)
    a = tiled(10, 4)
    for (i, j) in a.local_keys():
        a.tiles[(i, j)] = np.full((a.rows[i], a.rows[j]), 1.0 + i + j, order="F")
    w = FactorWriter(str(out), "/L", 10)
    w.write(a, {"map": "2dbc 1x1"})
    with h5py.File(out, "r") as fh:
        L = fh["/L"][...]
        assert fh["/L"].attrs["map"] == "2dbc 1x1"
        assert fh["keep"][...].tolist() == [0, 1, 2]
    assert np.all(np.triu(L, 1) == 0) and L[9, 0] == 3.0 and L[0, 0] == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["l.h5"]  # no temporary left
    with pytest.raises(UsageError, match="already exists; pass overwrite=True") as info:
        FactorWriter(str(out), "/L", 10)
    assert info.value.params == ("overwrite",)
    assert flag_message(info.value).endswith(      # the command line's words
        "already exists; pass --overwrite to replace it, or choose another dataset name")
    FactorWriter(str(out), "/L", 10, overwrite=True).write(a)


def test_output_never_overwrites_input(tmp_path):
    f = tmp_path / "a.h5"
    write_matrix(str(f), "/A", 6, lambda r0, r1: np.eye(6)[r0:r1])
    before = sha256_file(f)
    with pytest.raises(UsageError, match="never modifies its input"):
        FactorWriter(str(f), "/L", 6, input_path=str(f))
    assert sha256_file(f) == before
    with pytest.raises(UsageError, match=r"^path .*/no/l.h5: the folder .* does not exist"):
        FactorWriter(str(tmp_path / "no" / "l.h5"), "/L", 6)
    with pytest.raises(UsageError, match=r"^--output .*/no/l.h5: the folder"):
        FactorWriter(str(tmp_path / "no" / "l.h5"), "/L", 6, role="--output")


def test_generate_errors(tmp_path, capsys):
    f = tmp_path / "a.h5"
    assert main(["generate", "--n", "10", "--output", f"{f}:/A"]) == 0
    assert main(["generate", "--n", "10", "--output", f"{f}:/A"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["generate", "--n", "10", "--output", f"{f}:/A", "--overwrite",
                 "--kind", "indefinite:4"]) == 0
    with h5py.File(f) as fh:
        assert fh["A"].attrs["kind"] == "indefinite:4"
        with pytest.raises(np.linalg.LinAlgError):
            np.linalg.cholesky(fh["A"][...])
    assert main(["generate", "--n", "10", "--output", "nofile"]) == 2
    with pytest.raises(SystemExit, match="2"):         # refused by the parser
        main(["generate", "--n", "0", "--output", f"{f}:/B"])
    assert main(["generate", "--n", "10", "--output", f"{f}:/B", "--kind", "indefinite:10"]) == 2


@pytest.mark.parametrize("file_dtype, dtype", [(">f8", np.float64), ("<f4", np.float32),
                                               (">f4", np.float32)])
def test_from_hdf5_any_byte_order_into_one_arena(tmp_path, file_dtype, dtype):
    """The matrix takes the dataset's precision whatever its byte order (a big-endian
    file once gave dtype None), and its tiles are read in place into one arena."""
    from mpi4py import MPI

    a = np.eye(40) * 3 + 0.1
    path = str(tmp_path / "a.h5")
    with h5py.File(path, "w") as fh:
        fh.create_dataset("A", data=a, dtype=file_dtype)
    m = DistributedMatrix.from_hdf5(path, "/A", 16, get_map("2dbc", 1), comm=MPI.COMM_SELF)
    assert m.dtype == np.dtype(dtype)
    assert all(t.dtype == m.dtype and t.flags.f_contiguous for t in m.tiles.values())
    bases = set()
    for t in m.tiles.values():
        while t.base is not None:
            t = t.base
        bases.add(id(t))
    assert len(bases) == 1
    np.testing.assert_allclose(m.gather(), np.tril(a), rtol=1e-6)


# -- file sizes -------------------------------------------------------------------------
def filled(n, nb, dtype=np.float64, factor=False):
    """A one-rank symmetric matrix (or factor) of ones in ``dtype``."""
    from mpi4py import MPI

    a = DistributedMatrix.from_function(lambda r0, r1, c0, c1: np.ones((r1 - r0, c1 - c0)),
                                        (n, n), nb, get_map("2dbc", 1), dtype=dtype,
                                        comm=MPI.COMM_SELF)
    a.factor = factor
    return a


def test_chunks_at_most_nb_and_256_and_split_n_evenly():
    from starchol.linalg.hdf5_tmp import chunks as _chunks

    assert _chunks(1000, 300) == (250, 250)      # 4 chunks of 250, not 256 + 232 pad
    assert _chunks(1000, 100) == (100, 100)
    assert _chunks(1400) == (234, 234)           # no tile size: at most 256
    assert _chunks((1001, 7), 512) == (251, 7)
    assert _chunks(10, 300) == (10, 10)


def test_float32_matrix_is_stored_as_float32(tmp_path):
    """It was upcast to float64: twice the bytes (8.0 MB instead of 4.0 MB at n = 1000)."""
    out = tmp_path / "a.h5"
    filled(1000, 300, np.float32).to_hdf5(str(out), "/A")
    with h5py.File(out) as fh:
        assert fh["A"].dtype == np.float32 and fh["A"].chunks == (250, 250)
        np.testing.assert_array_equal(fh["A"][...], 1.0)
    assert 4_000_000 < out.stat().st_size < 4_100_000


def test_factor_file_allocates_lower_triangle_chunks_only(tmp_path):
    """NB = 300 > the chunk side 250: a diagonal tile covers chunks above the diagonal,
    which are never written (10 of 16 chunks, 5.0 MB instead of 6.5 MB or 7.2 MB)."""
    out = tmp_path / "l.h5"
    filled(1000, 300, factor=True).to_hdf5(str(out), "/L")
    with h5py.File(out) as fh:
        d = fh["L"]
        assert d.chunks == (250, 250) and d.id.get_num_chunks() == 10
        rows_cols = [d.id.get_chunk_info(k).chunk_offset for k in range(10)]
        assert all(r >= c for r, c in rows_cols)
        L = d[...]
    np.testing.assert_array_equal(L, np.tril(np.ones((1000, 1000))))
    assert 5_000_000 < out.stat().st_size < 5_100_000
    w = tmp_path / "w.h5"                       # starchol run's writer: chunks of <= NB
    FactorWriter(str(w), "/L", 1000, nb=100).write(filled(1000, 100, factor=True))
    with h5py.File(w) as fh:
        assert fh["L"].chunks == (100, 100) and fh["L"].id.get_num_chunks() == 55
        np.testing.assert_array_equal(fh["L"][...], L)


def test_replacing_a_dataset_leaves_no_dead_space(tmp_path):
    """The old dataset was deleted from a copy of the file, its bytes left behind: a
    23.8 MB file grew to 39.6 MB at the first replacement of its 15.7 MB dataset. The
    rest of the file (groups, attributes, links) is kept."""
    f = tmp_path / "b.h5"
    a = filled(1400, 200)
    a.to_hdf5(str(f), "/M")
    with h5py.File(f, "a") as fh:
        fh.attrs["note"] = "root"
        g = fh.create_group("g/h")
        g["v"] = np.arange(5)
        g["v"].attrs["unit"] = "m"
        fh["hard"] = g["v"]                     # a second hard link to g/h/v
        fh["soft"] = h5py.SoftLink("/g/h/v")
        fh["ext"] = h5py.ExternalLink("other.h5", "/X")
    assert main(["generate", "--n", "1000", "--output", f"{f}:/A"]) == 0   # after /M
    sizes = [f.stat().st_size]
    for _ in range(3):
        a.to_hdf5(str(f), "/M", overwrite=True)
        sizes.append(f.stat().st_size)
    assert max(sizes) - min(sizes) < 100_000, sizes
    with h5py.File(f) as fh:
        np.testing.assert_array_equal(fh["M"][...], 1.0)
        assert fh.attrs["note"] == "root" and fh["g/h/v"].attrs["unit"] == "m"
        assert fh["hard"].id == fh["g/h/v"].id              # still one object
        assert fh.get("soft", getlink=True).path == "/g/h/v"
        assert fh.get("ext", getlink=True).filename == "other.h5"
        assert fh["A"].shape == (1000, 1000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.h5"]


# -- what a dataset holds ---------------------------------------------------------------
def test_generate_writes_a_content_attribute(tmp_path):
    f = tmp_path / "a.h5"
    assert main(["generate", "--n", "20", "--output", f"{f}:/A", "--seed", "2"]) == 0
    with h5py.File(f) as fh:
        attrs = dict(fh["A"].attrs)
    assert attrs["content"] == "symmetric matrix (both triangles)"
    assert attrs["kind"] == "spd" and attrs["seed"] == 2 and attrs["n"] == 20


def test_right_hand_sides_round_trip_as_rhs(tmp_path):
    """to_hdf5 refused kind='rhs' ('to_hdf5 writes symmetric matrices and factors')."""
    from mpi4py import MPI

    f = str(tmp_path / "b.h5")
    b0 = np.arange(30, dtype=np.float32).reshape(10, 3) - 7.5
    b = DistributedMatrix.from_numpy(b0, 4, get_map("2dbc", 1), kind="rhs",
                                     comm=MPI.COMM_SELF)
    b.to_hdf5(f, "/X", attrs={"note": "solution"})
    with h5py.File(f) as fh:
        d = fh["X"]
        assert d.shape == (10, 3) and d.dtype == np.float32
        assert d.attrs["content"] == "right-hand sides or solutions (N x K, every entry)"
        assert d.attrs["note"] == "solution"
        np.testing.assert_array_equal(d[...], b0)
    back = DistributedMatrix.from_hdf5(f, "/X", 4, get_map("2dbc", 1), comm=MPI.COMM_SELF)
    assert (back.kind, back.shape, back.dtype) == ("rhs", (10, 3), np.float32)
    np.testing.assert_array_equal(back.gather(), b0)
    with pytest.raises(UsageError, match=r"b\.h5:/X holds right-hand sides or solutions "
                                         r".*read it with kind='rhs'") as info:
        DistributedMatrix.from_hdf5(f, "/X", 4, get_map("2dbc", 1), kind="symmetric",
                                    comm=MPI.COMM_SELF)
    assert info.value.params == ("kind",)
    with pytest.raises(UsageError, match="holds right-hand sides"):
        inspect_input(f, "/X")                   # starchol run --input
    with pytest.raises(UsageError, match="kind must be one of symmetric, rhs or None"):
        DistributedMatrix.from_hdf5(f, "/X", 4, get_map("2dbc", 1), kind="lower",
                                    comm=MPI.COMM_SELF)


def test_any_matrix_reads_as_rhs_when_asked(tmp_path):
    from mpi4py import MPI

    f = str(tmp_path / "c.h5")
    c0 = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    with h5py.File(f, "w") as fh:
        fh["C"] = c0                            # no content attribute: not starchol's
    with pytest.raises(UsageError, match="must be a square matrix"):
        DistributedMatrix.from_hdf5(f, "/C", 2, get_map("2dbc", 1), comm=MPI.COMM_SELF)
    c = DistributedMatrix.from_hdf5(f, "/C", 2, get_map("2dbc", 1), kind="rhs",
                                    comm=MPI.COMM_SELF)
    assert c.kind == "rhs" and c.input_info["max_abs"] == 6.0
    np.testing.assert_array_equal(c.gather(), c0)
    with h5py.File(f, "a") as fh:
        fh["C"][1, 1] = np.nan
    with pytest.raises(UsageError, match="non-finite value .* row 1, column 1"):
        DistributedMatrix.from_hdf5(f, "/C", 2, get_map("2dbc", 1), kind="rhs",
                                    comm=MPI.COMM_SELF)


# -- pre-flight of outputs and inputs ---------------------------------------------------
def test_output_under_a_dataset_or_on_a_group_is_refused(tmp_path, capsys):
    """/A/L under the dataset /A failed after the work with 'TypeError: Incompatible
    object (Dataset) already exists' (status 1); a group was replaced, with all it held."""
    f = tmp_path / "a.h5"
    assert main(["generate", "--n", "10", "--output", f"{f}:/A"]) == 0
    with h5py.File(f, "a") as fh:
        fh.create_group("G/H")
    before = sha256_file(f)
    capsys.readouterr()
    assert main(["generate", "--n", "10", "--output", f"{f}:/A/L"]) == 2
    assert capsys.readouterr().err.endswith(
        f"a.h5:/A/L cannot be written: /A is a dataset in {f}, which cannot hold /A/L; "
        f"choose another dataset name\n")
    assert main(["generate", "--n", "10", "--output", f"{f}:/G", "--overwrite"]) == 2
    assert (f"a.h5:/G is a group in {f} (holding 1 object(s)); starchol replaces a "
            f"dataset, never a group") in capsys.readouterr().err
    with pytest.raises(UsageError, match="/A is a dataset in"):
        FactorWriter(str(f), "/A/B/L", 10, overwrite=True)
    assert sha256_file(f) == before
    assert main(["generate", "--n", "10", "--output", f"{f}:/G/H/L"]) == 0   # in the group


def test_read_only_outputs_are_refused_and_replaced_files_keep_their_mode(tmp_path):
    """A file marked read-only was replaced (its folder allowed the rename), and every
    replaced file came back 0644 whatever it was."""
    import stat

    f = tmp_path / "a.h5"
    assert main(["generate", "--n", "10", "--output", f"{f}:/A"]) == 0
    f.chmod(0o640)
    assert main(["generate", "--n", "10", "--output", f"{f}:/B"]) == 0
    assert main(["generate", "--n", "10", "--output", f"{f}:/B", "--overwrite"]) == 0
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    f.chmod(0o444)
    before = sha256_file(f)
    with pytest.raises(UsageError, match=r"^path .*a\.h5 is read-only \(no write permission"
                                         r"\); make it writable \(chmod u\+w\)"):
        FactorWriter(str(f), "/C", 10)
    assert main(["generate", "--n", "10", "--output", f"{f}:/A", "--overwrite"]) == 2
    assert sha256_file(f) == before and stat.S_IMODE(f.stat().st_mode) == 0o444
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    try:
        with pytest.raises(UsageError, match=r"--output .*/ro/b\.h5: the folder .*/ro is not "
                                             r"writable"):
            write_matrix(str(ro / "b.h5"), "/A", 3, lambda r0, r1: np.eye(3)[r0:r1])
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize("value,words", [
    (np.arange(3), r"holds an array of shape \(3,\) \(int64\)"),
    (5, r"holds a number \(int64\), 5"),
    (h5py.Empty("f8"), "holds no value"),
])
def test_malformed_content_attribute_is_named(tmp_path, value, words):
    """A content attribute of another type failed with numpy's 'truth value of an array
    is ambiguous' (or went unnoticed)."""
    f = tmp_path / "a.h5"
    with h5py.File(f, "w") as fh:
        fh["A"] = np.eye(3)
        fh["A"].attrs["content"] = value
    with pytest.raises(UsageError, match=rf"a\.h5:/A: its attribute 'content' {words}, not "
                                         rf"a text; .*rewrite or delete the attribute"):
        inspect_input(str(f), "/A")


def test_content_stored_as_bytes_is_read_as_text(tmp_path):
    f = tmp_path / "a.h5"
    with h5py.File(f, "w") as fh:
        fh["L"] = np.eye(3)
        fh["L"].attrs["content"] = np.bytes_(b"Cholesky factor L (lower triangle; zeros above)")
    with pytest.raises(UsageError, match="holds a Cholesky factor L"):
        inspect_input(str(f), "/L")


def test_a_file_locked_by_another_program_says_what_to_do(tmp_path, capsys):
    """HDF5's lock error read 'cannot be opened by HDF5 (damaged or truncated file?)'."""
    from conftest import held_open

    f = tmp_path / "a.h5"
    assert main(["generate", "--n", "10", "--output", f"{f}:/A"]) == 0
    with held_open(f):
        with pytest.raises(UsageError, match=r"^input file .*a\.h5 is open in another "
                                             r"program \(HDF5 locks .*close that program "
                                             r".*HDF5_USE_FILE_LOCKING=FALSE"):
            inspect_input(str(f), "/A")
        capsys.readouterr()
        assert main(["generate", "--n", "10", "--output", f"{f}:/B"]) == 2
        assert "is open in another program" in capsys.readouterr().err
    assert inspect_input(str(f), "/A") == (10, "float64")
