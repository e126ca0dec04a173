"""Symmetric maps for every node count: D/S of ``sym`` against 2DBC, SBC and the bound.

For every P in a range (default 2..200) this computes

- at a large NT (the leading factor F of D ~ S F, i.e. NT -> infinity, the map built
  without a bound on its pattern size): F of the ``sym`` choice, of the best 2DBC on
  exactly P nodes (p + q - 2), of the best SBC on at most P nodes (extended r - 2 or
  basic r - 1), the lower bound sqrt(P) - 1 of a balanced symmetric pattern, and
  sqrt(2P) (SBC's level);
- at NT = 600 (``--nt``), the exact model: D/S of ``sym`` built for that NT and of the
  best 2DBC, and sym's flops max/avg;
- the CPU seconds of building ``sym`` for that NT and counting its volume and load (what
  ``starchol volume --dist sym --nodes P --nt 600`` does after its imports);
- with ``--cli``, the wall and CPU time of that command in a fresh process (exit status
  checked).

Usage:
    python benchmarks/symmetric_maps.py [--first 2] [--last 200] [--nt 600] [--cli]
        [--json FILE] [--docs docs/volume-model.md] [--png docs/symmetric_maps.png]
        [--from-json FILE]

``--docs`` rewrites the table between the markers ``<!-- symmetric-maps-table -->`` and
``<!-- /symmetric-maps-table -->`` in that file. Every argument is checked before the
sweep (P from 2 up, FIRST <= LAST, NT >= 1, the ``--docs`` file and its markers, the
``--from-json`` rows, writable output folders); ``--json`` is written whole or not at
all; Ctrl-C stops with exit status 130 (benchmarks/common.py).
"""
import json
import math
import os
import resource
import subprocess
import sys
import time

from common import (ArgumentParser, at_least, check_output_path, positive_int, run_main,
                    write_json)

from starchol.distributions import get_map, square_grid
from starchol.model.load import node_load
from starchol.distributions.factory import sbc_candidates
from starchol.model.volume import stored_tiles, transfer_pairs_tiles

BEGIN, END = "<!-- symmetric-maps-table -->", "<!-- /symmetric-maps-table -->"


def best_sbc(p):
    """(label, F) of the best SBC on at most p nodes, or (None, None)."""
    maps = sbc_candidates(p)
    if not maps:
        return None, None
    m = min(maps, key=lambda m: (m.leading_factor(), -m.nodes))
    return f"{m.name} r={m.r} ({m.nodes})", float(m.leading_factor())


def cli_seconds(p, nt):
    """Wall and CPU seconds (user + sys of the child) of ``starchol volume --dist sym``, and
    its exit status. On a shared machine the CPU time is the figure to compare with 10 s."""
    exe = os.path.join(os.path.dirname(sys.executable), "starchol")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "starchol"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd + ["volume", "--dist", "sym", "--nodes", str(p), "--nt", str(nt),
                                 "--json", "--quiet"], capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def row(p, nt, cli):
    big = get_map("sym", p)
    cpu = time.process_time()
    at_nt = get_map("sym", p, nt=nt)
    sym_nt_pairs = transfer_pairs_tiles(at_nt, nt)
    sym_nt_flops = node_load(at_nt, nt)["flops_max_over_avg"]
    cpu = time.process_time() - cpu
    pr, qr = square_grid(p)
    grid = get_map("2dbc", p, grid=(pr, qr))
    s = stored_tiles(nt)
    sbc_label, sbc_f = best_sbc(p)
    out = {
        "nodes": p,
        "sym": big.label, "sym_r": big.r, "sym_F": big.leading_factor(),
        "2dbc": f"{pr}x{qr}", "2dbc_F": float(pr + qr - 2),
        "sbc": sbc_label, "sbc_F": sbc_f,
        "bound": math.sqrt(p) - 1, "sqrt2P": math.sqrt(2 * p),
        "nt": nt, "sym_nt": at_nt.label, "sym_nt_r": at_nt.r,
        "sym_nt_ratio": int(sym_nt_pairs.sum()) / s,
        "2dbc_nt_ratio": int(transfer_pairs_tiles(grid, nt).sum()) / s,
        "sym_nt_flops": sym_nt_flops,
        "sym_nt_cpu_s": cpu,
    }
    if cli:
        out["cli_s"], out["cli_cpu_s"], out["cli_rc"] = cli_seconds(p, nt)
    return out


def notes(r):
    out = []
    if r["sym_F"] > r["sqrt2P"] + 1e-9:
        out.append("F > sqrt(2P)")
    if r["nodes"] >= 10 and r["sym_nt_ratio"] > r["2dbc_nt_ratio"]:
        out.append("above 2DBC at NT")
    if r["nodes"] >= 10 and r["sym_nt_flops"] > 1.10:
        out.append("flops > 1.10")
    if "cli_s" in r and (r["cli_rc"] != 0 or r["cli_cpu_s"] > 10):
        out.append(f"CLI {r['cli_cpu_s']:.1f} s CPU, rc {r['cli_rc']}")
    return "; ".join(out)


def markdown(rows):
    nt = rows[0]["nt"]
    head = ("| P | sym pattern (large NT) | r | F sym | F best 2DBC | F best SBC <= P | "
            f"bound sqrt(P)-1 | sqrt(2P) | D/S sym, NT={nt} | D/S 2DBC, NT={nt} | "
            f"flops max/avg sym, NT={nt} | CPU s, build + count | notes |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        sbc = "-" if r["sbc"] is None else f"{r['sbc_F']:.0f} ({r['sbc']})"
        lines.append(
            f"| {r['nodes']} | {r['sym']} | {r['sym_r']} | {r['sym_F']:.2f} | "
            f"{r['2dbc_F']:.0f} ({r['2dbc']}) | {sbc} | {r['bound']:.2f} | "
            f"{r['sqrt2P']:.2f} | {r['sym_nt_ratio']:.2f} | {r['2dbc_nt_ratio']:.2f} | "
            f"{r['sym_nt_flops']:.3f} | {r['sym_nt_cpu_s']:.1f} | {notes(r)} |")
    return "\n".join(lines)


def figure(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = [r["nodes"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 5))
    ax.plot(p, [r["2dbc_F"] for r in rows], "s", ms=3, color="tab:blue",
            label="best 2DBC on P nodes (p+q-2)")
    ax.plot(p, [r["sbc_F"] if r["sbc_F"] is not None else float("nan") for r in rows], "-",
            color="tab:red", label="best SBC on at most P nodes")
    ax.plot(p, [r["sqrt2P"] for r in rows], ":", color="tab:orange", label="sqrt(2P)")
    ax.plot(p, [r["sym_F"] for r in rows], "o", ms=3, color="tab:brown",
            label="sym (large NT)")
    ax.plot(p, [r["sym_nt_ratio"] for r in rows], "x", ms=3, color="tab:green",
            label=f"sym, exact D/S at NT={rows[0]['nt']}")
    ax.plot(p, [r["bound"] for r in rows], "--", color="black",
            label="bound sqrt(P)-1 (balanced symmetric)")
    ax.set_xlabel("nodes P")
    ax.set_ylabel("transfers per stored tile D/S")
    ax.set_ylim(0, 2 * math.sqrt(max(p)) + 2)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Leading transfers per stored tile, every node count")
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    plt.close(fig)
    os.replace(path + ".tmp.png", path)


def docs_problem(path):
    """Why ``--docs path`` cannot take the table (unreadable, no markers, folder not
    writable), or None."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError as exc:
        return f"--docs {path}: cannot read it ({exc.strerror or exc})"
    if BEGIN not in text or END not in text or text.index(BEGIN) > text.index(END):
        return f"--docs {path} has no {BEGIN} ... {END} markers"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--docs {path}: its folder {folder} is not writable"
    return None


#: keys every row of --json / --from-json has (what markdown() and figure() read)
ROW_KEYS = ("nodes", "sym", "sym_r", "sym_F", "2dbc", "2dbc_F", "sbc", "sbc_F", "bound",
            "sqrt2P", "nt", "sym_nt_ratio", "2dbc_nt_ratio", "sym_nt_flops", "sym_nt_cpu_s")


def load_rows(path):
    """The rows of an earlier ``--json``; (rows, None) or (None, why not)."""
    try:
        with open(path) as fh:
            rows = json.load(fh)
    except OSError as exc:
        return None, f"--from-json {path}: cannot read it ({exc.strerror or exc})"
    except ValueError as exc:
        return None, f"--from-json {path}: not JSON ({exc})"
    if not isinstance(rows, list) or not rows:
        return None, f"--from-json {path}: expected a non-empty list of rows (from --json)"
    for k, r in enumerate(rows):
        missing = [key for key in ROW_KEYS if not isinstance(r, dict) or key not in r]
        if missing:
            return None, (f"--from-json {path}: row {k} lacks {', '.join(missing)} "
                          f"(not rows of this script's --json)")
    return rows, None


def write_docs(path, table):
    with open(path) as fh:
        text = fh.read()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(head + BEGIN + "\n" + table + "\n" + END + tail)
    os.replace(tmp, path)


def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--first", type=at_least(2), default=2, metavar="P",
                    help="first node count (>= 2, default 2)")
    ap.add_argument("--last", type=at_least(2), default=200, metavar="P",
                    help="last node count (>= FIRST, default 200)")
    ap.add_argument("--nt", type=positive_int, default=600,
                    help="tiles per side of the exact counts (default 600)")
    ap.add_argument("--cli", action="store_true", help="time starchol volume per P")
    ap.add_json("the rows")
    ap.add_argument("--docs", metavar="FILE", help="rewrite the table in this markdown file")
    ap.add_argument("--png", metavar="FILE", type=check_output_path, help="write the figure")
    ap.add_argument("--from-json", metavar="FILE",
                    help="rows of an earlier run (--json) instead of computing them")
    args = ap.parse_args(argv)
    if args.first > args.last:
        ap.fail(f"--first {args.first} is above --last {args.last}")
    if args.from_json and args.json:
        ap.fail("--json writes computed rows; --from-json computes none (drop one)")
    if args.docs:
        problem = docs_problem(args.docs)
        if problem:
            ap.fail(problem)
    rows = []
    if args.from_json:
        rows, problem = load_rows(args.from_json)
        if problem:
            ap.fail(problem)
    for p in range(args.first, args.last + 1) if not rows else ():
        t = time.perf_counter()
        rows.append(row(p, args.nt, args.cli))
        r = rows[-1]
        print(f"P={p:4d} sym F={r['sym_F']:6.2f} r={r['sym_r']:4d}  2dbc {r['2dbc_F']:4.0f}  "
              f"bound {r['bound']:5.2f}  NT={args.nt}: sym {r['sym_nt_ratio']:6.2f} "
              f"2dbc {r['2dbc_nt_ratio']:6.2f} flops {r['sym_nt_flops']:.3f}"
              + (f" cli {r['cli_s']:.1f}s wall {r['cli_cpu_s']:.1f}s cpu rc {r['cli_rc']}"
                 if args.cli else "")
              + f"  ({time.perf_counter() - t:.1f} s) {notes(r)}", flush=True)
    table = markdown(rows)
    if args.json:
        write_json(args.json, rows)
    if args.docs:
        write_docs(args.docs, table)
    if args.png:
        figure(rows, args.png)
    short = [r for r in rows if notes(r)]
    print(f"{len(rows)} node counts; {len(short)} with notes:",
          ", ".join(f"P={r['nodes']} ({notes(r)})" for r in short) or "none")
    return 0


if __name__ == "__main__":
    run_main(main)
