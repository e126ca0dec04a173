"""Multi-node runs on an emulated cluster (``scripts/cluster.sh``): every node in its own
network namespace behind a shaped bridge port, Open MPI over TCP between them, a
multi-node Slurm, and a link fault.

Each node's link counters prove that the bytes StarPU-MPI counted crossed the emulated
links: a node's link sent at least the payload its rank sent, plus a few percent of
TCP/IP headers. Needs root and network namespaces; skipped, with the reason, otherwise.
Clusters are torn down whatever happens (fixtures with ``finally``).
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from conftest import _starchol_exe, cluster_or_skip, need_cluster_root, sha256_file  # noqa: E402
from emulated_cluster import SCRIPT, EmulatedCluster  # noqa: E402

#: seconds a link fault may take to end the job (TCP keepalive of Open MPI's daemons:
#: 2 s idle + 5 probes 1 s apart, then mpirun ends the job)
FAULT_BOUND_S = 30
#: TCP/IP overhead allowed on top of the payload: a link sends at most
#: payload * (1 + HEADERS) + SLACK bytes (headers ~3.6% at MTU 1500; launch, checks)
HEADERS, SLACK = 0.06, 400_000

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]


def test_script_runs_as_its_messages_show_it():
    """`up` and `status` tell the user to run `scripts/cluster.sh mpirun ...` (its $0):
    the script must be executable for that line to work (it was not: Permission denied)."""
    res = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and "cluster.sh up [--nodes K]" in res.stdout, res.stderr


def test_comm_bound_refuses_a_keep_folder_with_older_runs(tmp_path):
    """`benchmarks/comm_bound.py --keep DIR` over a folder with run documents of an earlier
    run would leave both in DIR/BANDWIDTH/, which `starchol report` then mixes; it is
    refused before any cluster is made."""
    need_cluster_root()
    (tmp_path / "10mbit").mkdir()
    (tmp_path / "10mbit" / "sbc-1.json").write_text("{}")
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "comm_bound.py"),
                             "--keep", str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        EmulatedCluster.sweep_orphans()
        pytest.fail("comm_bound started over a --keep folder holding older runs")
    assert proc.returncode == 1 and "already holds run documents" in err, err
    assert [p.name for p in (tmp_path / "10mbit").iterdir()] == ["sbc-1.json"]


@pytest.fixture(scope="module")
def starpu_env(tmp_path_factory):
    home = tmp_path_factory.mktemp("cluster_starpu_home")
    return dict(os.environ, STARPU_HOME=str(home), STARPU_SILENT="1")


@pytest.fixture(scope="module")
def cluster6(starpu_env):
    """A 6-node cluster with Slurm, links shaped to 1 gbit/s."""
    with cluster_or_skip(6, bandwidth="1gbit", slurm=True) as cl:
        yield cl
    assert not Path("/run/netns", f"{cl.name}-n0").exists()


def _run_and_count(cl, np_, args, env, tmp_path):
    """mpirun a starchol run on the cluster; (document, bytes each link sent)."""
    out = tmp_path / "run.json"
    before = cl.counters()
    res = cl.mpirun(np_, [*_starchol_exe(), "run", *map(str, args), "--workers", "1", "--quiet",
                          "--json", str(out)], timeout=240, env=env)
    after = cl.counters()
    assert res.returncode == 0, f"mpirun failed:\n{res.stdout}\n{res.stderr}"
    return json.loads(out.read_text()), after[:, 0] - before[:, 0]


def _check_links(doc, tx, np_):
    """Each rank's payload crossed its node's link (rank i runs on node i)."""
    sent = np.array(doc["bytes_measured_pairs"]).sum(axis=1)
    assert doc["match"] is True, doc["bytes_measured_pairs"]
    assert sent.min() > 0
    for i in range(np_):
        assert sent[i] <= tx[i] <= sent[i] * (1 + HEADERS) + SLACK, \
            f"node{i}: link sent {tx[i]} B, rank payload {sent[i]} B"
    for i in range(np_, len(tx)):   # nodes without a rank carry (almost) nothing
        assert tx[i] < SLACK, f"node{i} has no rank but its link sent {tx[i]} B"


def test_2dbc_2x2_on_4_nodes(cluster6, starpu_env, tmp_path):
    doc, tx = _run_and_count(cluster6, 4, ["--dist", "2dbc", "--grid", "2x2", "--n", 800,
                                           "--nb", 100], starpu_env, tmp_path)
    assert doc["nodes"] == 4 and doc["bytes_measured_total"] == doc["bytes_predicted_total"]
    _check_links(doc, tx, 4)


def test_sbc_on_6_nodes(cluster6, starpu_env, tmp_path):
    doc, tx = _run_and_count(cluster6, 6, ["--dist", "sbc", "--n", 1000, "--nb", 100],
                             starpu_env, tmp_path)
    assert doc["nodes"] == 6 and doc["map"].startswith("sbc r=4")
    _check_links(doc, tx, 6)


def test_hosts_names_and_tcp_only(cluster6):
    """Every node has its own host name and resolves the others'; MPI is TCP only."""
    res = cluster6.exec("node3", ["sh", "-c", "hostname; getent hosts node0 node5"])
    assert res.returncode == 0, res.stderr
    lines = res.stdout.split("\n")
    assert lines[0] == "node3"
    assert "10.231.0.1" in res.stdout and "10.231.0.6" in res.stdout
    env = cluster6.env({})
    assert env["OMPI_MCA_btl"] == "tcp,self" and env["OMPI_MCA_pml"] == "ob1"
    assert env["OMPI_MCA_btl_tcp_if_include"] == "10.231.0.0/24"


def test_ranks_may_run_on_every_core(cluster6):
    """The nodes share this machine's cores: no node's rank is bound (each node's daemon
    used to bind its rank to core 0, so all ranks shared one core and an MPI ping-pong
    took 8 ms), and StarPU is told not to pin its workers."""
    def allowed(text):
        return next(line.split(":")[1].strip() for line in text.splitlines()
                    if line.startswith("Cpus_allowed_list"))
    mine = allowed(Path("/proc/self/status").read_text())
    show = "cat /proc/self/status; echo nobind=$STARPU_WORKERS_NOBIND"
    res = cluster6.mpirun(3, ["sh", "-c", show], timeout=60)
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stdout.splitlines() if line.startswith("Cpus_allowed_list")]
    assert len(lines) == 3 and {allowed(line) for line in lines} == {mine}, res.stdout
    assert res.stdout.count("nobind=1") == 3


def test_mpirun_takes_the_callers_hostfile_and_hosts(cluster6, tmp_path):
    """`cluster.sh mpirun` lets the caller's --hostfile or --host replace the cluster's
    hostfile (mpirun refused a second --hostfile: 'More than one hostfile'); its own
    hostfile and --map-by node stay the default: rank i on node i."""
    where = ["sh", "-c", "echo rank $OMPI_COMM_WORLD_RANK on $(hostname)"]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node4 slots=2\nnode1 slots=1\n")
    cases = {("--hostfile", str(hostfile), "--map-by", "slot"): 3,
             ("--host", "node5,node2"): 2, (): 6}
    want = {3: {"rank 0 on node4", "rank 1 on node4", "rank 2 on node1"},
            2: {"rank 0 on node5", "rank 1 on node2"},
            6: {f"rank {i} on node{i}" for i in range(6)}}
    for args, np_ in cases.items():
        res = cluster6.mpirun(np_, where, timeout=60, mpirun_args=args)
        assert res.returncode == 0, f"{args}:\n{res.stdout}{res.stderr}"
        assert set(res.stdout.splitlines()) == want[np_], (args, res.stdout)


def test_mpirun_that_no_node_could_call_back_fails_at_once(cluster6):
    """Where the daemon started on a node could never reach mpirun, the launch agent fails
    (status 255, like ssh to an unreachable host) and mpirun ends at once, saying why. Both
    cases used to leave mpirun waiting forever (measured: over 5 minutes):
    a node whose link is down at launch, and mpirun run in the machine's own namespace
    with the cluster's environment (`eval "$(cluster.sh env)"`), which no node can reach."""
    cluster6.link("node5", "down")
    try:    # (a wait like the old one fails by the timeout)
        res = cluster6.mpirun(6, ["hostname"], timeout=60)
    finally:
        cluster6.link("node5", "up")
    assert res.returncode != 0, res.stderr
    assert "cannot reach node5: its link is DOWN" in res.stderr, res.stderr
    try:
        res = subprocess.run(["mpirun", "-np", "2", "hostname"], capture_output=True, text=True,
                             env=cluster6.env(), timeout=60, start_new_session=True)
    except subprocess.TimeoutExpired:
        cluster6.kill_jobs()
        pytest.fail("mpirun outside the nodes still waited after 60 s")
    assert res.returncode != 0, res.stderr
    assert f"mpirun runs outside cluster {cluster6.name}" in res.stderr, res.stderr
    assert not cluster6.wait_no_processes(timeout=10)


def test_up_is_idempotent_and_shaping_changes_live(cluster6):
    again = cluster6.script("up", "--nodes", 6, "--bandwidth", "1gbit")
    assert "already up" in again.stderr
    other = cluster6.script("up", "--nodes", 5, "--no-slurm", check=False)
    assert other.returncode == 1 and "run" in other.stderr and "down" in other.stderr
    cluster6.shape(bandwidth="500mbit")
    qdisc = subprocess.run(["ip", "netns", "exec", f"{cluster6.name}-n2", "tc", "qdisc",
                            "show", "dev", "eth0"], capture_output=True, text=True).stdout
    # the token bucket holds 1 ms of the rate: 62,500 bytes at 500 mbit/s
    assert "tbf" in qdisc and "500Mbit" in qdisc and "burst 62500b" in qdisc, qdisc
    cluster6.shape(bandwidth="1gbit")
    assert "state ok" in cluster6.script("status").stdout


_SEND_ON_REQUEST = """
import socket, sys
server = socket.create_server(("0.0.0.0", int(sys.argv[1])))
conn, _ = server.accept()
conn.recv(1)
conn.sendall(bytes(int(sys.argv[2])))
conn.close()
"""

_TIME_ONE_REPLY = """
import socket, sys, time
for _ in range(200):
    try:
        conn = socket.create_connection(("node1", int(sys.argv[1])))
        break
    except OSError:
        time.sleep(0.05)
time.sleep(0.3)   # the links idle: their token buckets fill
want, got = int(sys.argv[2]), 0
t0 = time.perf_counter()
conn.sendall(b"?")
while got < want:
    part = conn.recv(1 << 16)
    if not part:
        break
    got += len(part)
print(got, time.perf_counter() - t0)
"""


def test_an_idle_link_moves_a_tile_no_faster_than_its_rate(cluster6):
    """A link that has been idle passes a 512 KiB reply at its rate, not faster: its
    token bucket holds 1 ms of the rate (16 KiB at 100 mbit/s). The 10 ms bucket it had
    before let an idle 100 mbit/s link pass 125 kB at once: about 10 ms less for this
    reply, and 128 KiB tiles that cost nothing, which measured 100 mbit/s runs 20% faster
    than a real link allows (docs/cluster.md, "The links' token buckets")."""
    size, port, rate = 512 * 1024, 5601, 100e6 / 8
    cluster6.shape(bandwidth="100mbit")
    server = subprocess.Popen(["bash", str(SCRIPT), "--name", cluster6.name, "exec", "node1",
                               sys.executable, "-c", _SEND_ON_REQUEST, str(port), str(size)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        res = cluster6.exec("node0", [sys.executable, "-c", _TIME_ONE_REPLY, str(port),
                                      str(size)], timeout=60)
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, 9)
            server.wait()
        cluster6.shape(bandwidth="1gbit")
    assert res.returncode == 0, res.stderr
    got, took = res.stdout.split()
    assert int(got) == size
    # payload alone at the rate, less 10% for the clock: the headers only add to it
    assert float(took) >= 0.9 * size / rate, (took, size / rate)


def test_slurm_job_on_6_nodes_writes_its_factor(cluster6, starpu_env, tmp_path):
    """A script from `starchol slurm` (its default launcher, mpirun inside the allocation)
    runs sbc on 6 Slurm nodes; L L^T = A from the file. Submitted once: under srun
    --mpi=pmix, Open MPI 4.1.4 lost a rank to SIGSEGV in MPI_Init in 1 job in 4 here
    (docs/slurm.md, "Launchers"), which this test used to resubmit."""
    h5py = pytest.importorskip("h5py")
    a_file, l_file = tmp_path / "a.h5", tmp_path / "l.h5"
    gen = subprocess.run([*_starchol_exe(), "generate", "--n", "600", "--output", f"{a_file}:/A"],
                         capture_output=True, text=True, timeout=60)
    assert gen.returncode == 0, gen.stderr
    script = tmp_path / "job.sbatch"
    made = subprocess.run([*_starchol_exe(), "slurm", "--dist", "sbc", "--nodes", "6", "--nb",
                           "100", "--workers", "1", "--input", f"{a_file}:/A", "--output",
                           f"{l_file}:/L", "--check", "--time", "00:05:00", "--json-dir",
                           str(tmp_path / "results"), "-o", str(script)],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    env = cluster6.env(starpu_env)
    res = cluster6.exec("node0", ["sh", "-c", f"cd {tmp_path} && sbatch --parsable "
                                              f"--wait {script}"], timeout=180, env=env)
    logs = "".join(p.read_text() for p in tmp_path.glob("*.out"))
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\njob log:\n{logs}"
    job = res.stdout.strip().split(";")[0]
    info = cluster6.exec("node0", ["scontrol", "show", "job", "-o", job], env=env).stdout
    assert "JobState=COMPLETED" in info and "NodeList=node[0-5]" in info, info
    doc = json.loads((tmp_path / "results" / f"starchol-{job}.json").read_text())
    assert doc["nodes"] == 6 and doc["match"] is True and doc["residual"] < 1e-12
    with h5py.File(a_file, "r") as fa, h5py.File(l_file, "r") as fl:
        a, lower = fa["A"][...], fl["L"][...]
    assert np.allclose(lower @ lower.T, a, rtol=0, atol=1e-10 * np.abs(a).max())


def test_down_ends_processes_of_a_node_whose_namespace_name_was_deleted():
    """`ip netns del` on a node removes its name only; the processes in it (here a job's
    `sleep`) and so the namespace live on. `down` must still end them: it finds them by
    the namespace ids recorded at `up`, not by name."""
    with cluster_or_skip(2) as cl:
        job = subprocess.Popen(["bash", str(SCRIPT), "--name", cl.name, "exec", "node1",
                                "sleep", "300"], start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while not cl.processes()[1] and time.monotonic() < deadline:
                time.sleep(0.1)
            [(pid, comm)] = cl.processes()[1]
            assert comm == "sleep"
            subprocess.run(["ip", "netns", "del", f"{cl.name}-n1"], check=True, timeout=30)
            cl.down()
            try:
                job.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pytest.fail(f"down left the job's sleep (pid {pid}) running on node1")
            assert job.returncode != 0
        finally:
            if job.poll() is None:
                os.killpg(job.pid, 9)
                job.wait()


@pytest.fixture
def cluster3_slow():
    """3 nodes without Slurm, links at 10 mbit/s: a run long enough to break a link in."""
    with cluster_or_skip(3, bandwidth="10mbit") as cl:
        yield cl


def test_link_down_mid_run_ends_the_job(cluster3_slow, starpu_env, tmp_path):
    """node2's link goes down mid-run: mpirun ends within FAULT_BOUND_S, saying it lost
    node2; no output file, input unchanged, no process left on any node."""
    cl = cluster3_slow
    a_file = tmp_path / "a.h5"
    gen = subprocess.run([*_starchol_exe(), "generate", "--n", "2400", "--output", f"{a_file}:/A"],
                         capture_output=True, text=True, timeout=120)
    assert gen.returncode == 0, gen.stderr
    digest = sha256_file(a_file)
    before = cl.counters()
    proc = cl.popen_mpirun(3, [*_starchol_exe(), "run", "--dist", "sbc", "--nb", "200",
                               "--input", f"{a_file}:/A", "--output", f"{tmp_path}/l.h5:/L",
                               "--workers", "1", "--quiet"], env=starpu_env)
    try:
        # wait until the factorization moves tiles (node1's link has sent 1 MB)
        deadline = time.monotonic() + 120
        while (cl.counters()[1, 0] - before[1, 0] < 1_000_000 and proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before the fault:\n" + proc.stderr.read()
        cl.link("node2", "down")
        t_down = time.monotonic()
        try:
            out, err = proc.communicate(timeout=FAULT_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the job did not end within {FAULT_BOUND_S} s of the link fault")
        took = time.monotonic() - t_down
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            cl.kill_jobs()
            proc.communicate()
    assert proc.returncode != 0
    assert "lost communication with a remote daemon" in err and "node2" in err, err
    print(f"job ended {took:.1f} s after the link went down")
    left = cl.wait_no_processes(timeout=10)
    assert not left, f"processes left on the nodes: {left}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.h5"], list(tmp_path.iterdir())
    assert sha256_file(a_file) == digest
    cl.link("node2", "up")
