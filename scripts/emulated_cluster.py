"""Python side of ``scripts/cluster.sh``: an emulated cluster for tests and benchmarks.

    from emulated_cluster import EmulatedCluster, ClusterUnavailable

    with EmulatedCluster(6, bandwidth="200mbit") as cl:      # up ... always down
        before = cl.counters()
        res = cl.mpirun(6, ["starchol", "run", "--dist", "sbc", "--n", "1000", "--nb", "100"])
        sent = cl.counters()[:, 0] - before[:, 0]           # bytes each node's link sent

Every command goes through ``scripts/cluster.sh`` (one home for the cluster's rules);
this module adds timeouts, the byte counters as numpy arrays, and the processes left in
the nodes' namespaces. Needs root, like the script; :class:`ClusterUnavailable` is raised
when the script says the machine cannot host a cluster (exit status 77).
"""
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().with_name("cluster.sh")
#: daemons that belong to the cluster itself (Slurm), not to a job
DAEMONS = ("slurmd", "slurmctld", "slurmscriptd", "slurmstepd")


class ClusterUnavailable(RuntimeError):
    """This machine cannot host an emulated cluster (not root, no namespaces, no packages)."""


class ClusterError(RuntimeError):
    """A cluster.sh command failed."""


class EmulatedCluster:
    """K nodes in network namespaces (see ``scripts/cluster.sh``), brought up by :meth:`up`
    and torn down by :meth:`down` (also on leaving a ``with`` block, whatever happens).

    Parameters
    ----------
    nodes : int
        Node count K (hosts node0 .. node<K-1>).
    bandwidth, latency : str
        tc rate per node and direction (``"200mbit"``) and one-way delay (``"100us"``);
        ``"none"`` leaves the links unshaped.
    slurm : bool
        Start munged, slurmctld (node0) and one slurmd per node.
    name : str, optional
        Namespace prefix; a unique one by default, so that clusters never collide.
    subnet : str, optional
        The nodes' /24 (``"10.234.0"``); cluster.sh's default when None.
    slurmd_timeout : int, optional
        Slurm's SlurmdTimeout in seconds (cluster.sh's default, 30, when None): how long
        slurmctld waits for a silent node before it marks it DOWN.
    """

    def __init__(self, nodes, bandwidth="none", latency="none", slurm=False, name=None,
                 subnet=None, slurmd_timeout=None):
        self.nodes = int(nodes)
        self.bandwidth, self.latency, self.slurm = bandwidth, latency, bool(slurm)
        self.name = name or f"sct{uuid.uuid4().hex[:8]}"
        self.subnet, self.slurmd_timeout = subnet, slurmd_timeout
        self.is_up = False

    # -- the script -----------------------------------------------------------------------
    @staticmethod
    def _env(env):
        """The environment given to cluster.sh: ``env``, or Python's ``os.environ``. Always
        passed explicitly: a process whose MPI runs as a singleton (mpi4py imported, no
        mpirun) has PMIX_* / OMPI_MCA_ess=singleton in its C environment only, and an
        mpirun that inherits them ends at once, silently, with status 1."""
        return dict(os.environ if env is None else env)

    def script(self, *args, timeout=120, check=True, env=None):
        """Run ``cluster.sh --name NAME ARGS``; CompletedProcess (ClusterError if it fails)."""
        cmd = ["bash", str(SCRIPT), "--name", self.name, *map(str, args)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env=self._env(env))
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"{' '.join(cmd)} took over {timeout} s:\n{exc.stderr}") from None
        if proc.returncode == 77:
            raise ClusterUnavailable(proc.stderr.strip().splitlines()[-1])
        if check and proc.returncode != 0:
            raise ClusterError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                               f"{proc.stdout}{proc.stderr}")
        return proc

    def up(self, timeout=300):
        """Create the cluster (installs packages if missing); returns self."""
        args = ["up", "--nodes", self.nodes, "--bandwidth", self.bandwidth,
                "--latency", self.latency]
        if self.slurmd_timeout is not None:
            args += ["--slurmd-timeout", self.slurmd_timeout]
        if not self.slurm:
            args.append("--no-slurm")
        if self.subnet:
            args += ["--subnet", self.subnet]
        self.script(*args, timeout=timeout)
        self.is_up = True
        # who made it: sweep_orphans() removes it if this process dies without down()
        (self.state_dir() / "owner").write_text(f"{os.getpid()}\n")
        return self

    @classmethod
    def sweep_orphans(cls):
        """Tear down the clusters this helper made (default names) whose owner process is
        gone (a test run killed before its teardown); returns their names."""
        swept = []
        base = Path("/run/starchol-cluster")
        for state in sorted(base.glob("sct*")) if base.is_dir() else []:
            try:
                owner = int((state / "owner").read_text())
            except (OSError, ValueError):
                continue  # being made right now, or not ours
            if not Path(f"/proc/{owner}").exists():
                cls(2, name=state.name).down()
                swept.append(state.name)
        return swept

    def down(self):
        """Stop every process on the nodes and delete the namespaces (safe to repeat)."""
        self.script("down", timeout=120)
        self.is_up = False

    def __enter__(self):
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc):
        self.down()
        return False

    def shape(self, bandwidth=None, latency=None, node=None):
        """Change the shaping of every node (or one) without a restart."""
        args = ["shape"]
        if bandwidth is not None:
            args += ["--bandwidth", bandwidth]
        if latency is not None:
            args += ["--latency", latency]
        if node is not None:
            args += ["--node", node]
        self.script(*args)
        if node is None:
            self.bandwidth = bandwidth or self.bandwidth
            self.latency = latency or self.latency

    def link(self, node, state):
        """Bring ``node`` (``"node2"`` or 2)'s link ``"up"`` or ``"down"``."""
        self.script("link", f"node{node}" if isinstance(node, int) else node, state)

    def slurmd(self, node, action):
        """``"kill"`` (SIGKILL) or ``"start"`` the slurmd of ``node`` (``"node2"`` or 2)."""
        self.script("slurmd", f"node{node}" if isinstance(node, int) else node, action)

    def state_dir(self):
        return Path("/run/starchol-cluster") / self.name

    def hostfile(self):
        return self.state_dir() / "hostfile"

    def env(self, base=None):
        """The environment of programs run on the nodes (OMPI_MCA_*, SLURM_CONF, ...)."""
        env = dict(os.environ if base is None else base)
        for line in self.script("env").stdout.splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value
        return env

    # -- programs on the nodes ------------------------------------------------------------
    def _run(self, args, timeout, env):
        cmd = ["bash", str(SCRIPT), "--name", self.name, *map(str, args)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self._env(env), start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            self.kill_jobs()
            out, err = proc.communicate()
            raise ClusterError(f"{' '.join(cmd)} hung (killed after {timeout} s)\n"
                               f"stdout:\n{out}\nstderr:\n{err}") from None
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    def exec(self, node, argv, timeout=120, env=None):
        """Run ``argv`` on ``node`` (e.g. ``sbatch``); CompletedProcess."""
        return self._run(["exec", node, *argv], timeout, env)

    def mpirun(self, np_, argv, timeout=300, env=None, mpirun_args=()):
        """``mpirun -np NP ARGV`` across the nodes (rank i on node i); CompletedProcess.

        On timeout, everything is killed (mpirun and every job process on the nodes) and
        :class:`ClusterError` is raised.
        """
        return self._run(["mpirun", *mpirun_args, "-np", np_, *argv], timeout, env)

    def popen_mpirun(self, np_, argv, env=None, mpirun_args=()):
        """Start ``mpirun`` and return the Popen (text pipes, own session)."""
        cmd = ["bash", str(SCRIPT), "--name", self.name, "mpirun", *mpirun_args, "-np",
               str(np_), *map(str, argv)]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self._env(env), start_new_session=True)

    # -- observation ----------------------------------------------------------------------
    def counters(self):
        """(K, 2) int64 array: bytes sent (tx) and received (rx) by each node's link."""
        rows = []
        for line in self.script("counters").stdout.splitlines():
            _, tx, rx = line.split()
            rows.append((int(tx), int(rx)))
        if len(rows) != self.nodes:
            raise ClusterError(f"counters: expected {self.nodes} nodes, got {len(rows)}")
        return np.array(rows, dtype=np.int64)

    def processes(self, include_daemons=False):
        """{node index: [(pid, program)]} of the processes in each node's namespace."""
        found = {}
        for i in range(self.nodes):
            proc = subprocess.run(["ip", "netns", "pids", f"{self.name}-n{i}"],
                                  capture_output=True, text=True, timeout=30)
            items = []
            for pid in proc.stdout.split():
                try:
                    comm = Path(f"/proc/{pid}/comm").read_text().strip()
                except OSError:
                    continue  # ended meanwhile
                if include_daemons or comm not in DAEMONS:
                    items.append((int(pid), comm))
            found[i] = items
        return found

    def wait_no_processes(self, timeout=10.0):
        """Wait until no job process is left on any node; returns what is left (empty dict
        when none)."""
        deadline = time.monotonic() + timeout
        while True:
            left = {i: p for i, p in self.processes().items() if p}
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.2)

    def kill_jobs(self):
        """SIGKILL every job process on the nodes (not the Slurm daemons)."""
        for items in self.processes().values():
            for pid, _ in items:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
