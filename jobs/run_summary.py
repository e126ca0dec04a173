"""The summary ``starchol run`` prints on rank 0: a view of the run document (decimal
units; every figure with its unit)."""
import numpy as np

from ..distributions.base import count_text
from ..units import format_bytes
from .output import bytes_text


def summary(doc):
    """The lines ``starchol run`` prints for the run document ``doc``, as one text."""
    res = "not checked (add --check)" if doc["residual"] is None else f"{doc['residual']:.3e}"
    return "\n".join([
        f"starchol run: {doc['map']}, {count_text(doc['nodes'], 'rank')}, "
        f"{count_text(doc['runtime']['workers_per_rank'], 'worker')}/rank, scheduler "
        f"{doc['runtime']['scheduler']}, StarPU {doc['runtime']['starpu_version']}",
        f"  StarPU build: {doc['runtime'].get('starpu_build') or 'not recorded'}",
        f"  kernels' BLAS: {doc['runtime'].get('kernel_blas') or 'not recorded'}",
        f"  N = {doc['n']}, NB = {doc['nb']}, NT = {doc['nt']} (elements, tiles), "
        f"{doc.get('dtype', 'float64')}, matrix {doc['matrix']}, seed {doc['seed']}",
        f"  time {doc['time_s']:.3f} s (submission {doc['submit_s']:.3f} s, "
        f"{doc['tasks']} tasks), {doc['gflops']:.2f} GFlop/s",
        *([] if doc.get("mixed") else
          [f"  residual ||A - L L^T||_F / ||A||_F = {res}"]),
        f"  log det A = {doc['logdet']:.10g}" + _logdet_note(doc),
        f"  bytes sent between ranks (cache {'on' if doc['cache'] else 'off'}): measured "
        f"{bytes_text(doc['bytes_measured_total'])}, predicted "
        f"{bytes_text(doc['bytes_predicted_total'])}, per-pair match: "
        f"{'yes' if doc['match'] else 'NO'}",
        *solve_lines(doc),
        *_mixed_lines(doc),
        *_memory_lines(doc),
        *_kernel_lines(doc),
    ])


def solve_lines(doc):
    sol = doc.get("solve")
    if not sol:
        return []
    lines = [f"  solve A X = B: {count_text(sol['nrhs'], 'right-hand side')} ({sol['rhs']}), "
             f"time {sol['time_s']:.3f} s ({sol['tasks']} tasks); bytes sent measured "
             f"{bytes_text(sol['bytes_measured_total'])}, predicted "
             f"{bytes_text(sol['bytes_predicted_total'])}, per-pair match: "
             f"{'yes' if sol['match'] else 'NO'}"]
    variant = sol.get("solve_variant")
    if variant:
        lines.append(f"  solve variant: {variant['variant']} ({variant['reason']})")
    res = sol.get("residual")
    lines.append("  solve residual ||B - A X||_F / (||A||_F ||X||_F + ||B||_F) = " +
                 ("not checked (add --check)" if res is None else f"{res:.3e}"))
    if sol.get("solution"):
        lines.append(f"  solution X written to {sol['solution']}")
    return lines


def _logdet_note(doc):
    mixed = doc.get("mixed")
    if not mixed:
        return ""
    return (" (from the float64 factor)" if mixed.get("logdet_exact") else
            " (from the float32 factor: approximate, docs/api.md solve_mixed)")


def _mixed_lines(doc):
    """The mixed-precision solve's lines of the summary (``--dtype mixed``)."""
    mixed = doc.get("mixed")
    if not mixed:
        return []
    t = mixed["time_s"]
    fallback = ("no (float32 factor refined to float64 accuracy)" if mixed["fallback"]
                is None else f"YES, {mixed['fallback']}: {mixed['fallback_reason']}")
    lines = [f"  mixed precision: {count_text(doc['nrhs'], 'right-hand side')} "
             f"({mixed['rhs']}), {count_text(mixed['iterations'], 'refinement iteration')}"
             f", fallback to float64: {fallback}",
             f"  backward error ||B - A X||_F / (||A||_F ||X||_F + ||B||_F) = "
             f"{mixed['backward_error']:.3e} (bound sqrt(N) 2^-53 = "
             f"{mixed['tolerance']:.3e}); history "
             + (", ".join(f"{h:.2e}" for h in mixed["history"]) or "- (no float32 factor)"),
             f"  time split: float32 copy + factorization {t['factor']:.3f} s, refinement "
             f"{t['refinement']:.3f} s, fallback {t['fallback']:.3f} s"]
    measured, predicted = (mixed.get("bytes_measured_phase_pairs"),
                           mixed.get("bytes_predicted_phase_pairs"))
    if measured and predicted:
        parts = ", ".join(f"{k} {bytes_text(int(np.sum(measured[k])))}"
                          + ("" if np.array_equal(measured[k], predicted[k]) else " (NO match)")
                          for k in measured if np.sum(predicted[k]) or np.sum(measured[k]))
        lines.append(f"  bytes per graph (measured; each equal to the model per pair unless "
                     f"said): {parts}")
    if mixed.get("solution"):
        lines.append(f"  solution X written to {mixed['solution']}")
    return lines


def _kernel_lines(doc):
    table = doc.get("kernels") or {}
    if not table:
        return []
    parts = ", ".join(f"{k} {v['cpu']}/{v['cuda']}" for k, v in table.items())
    dev = doc.get("device_bytes") or {}
    lines = [f"  tasks per kernel (CPU/GPU workers): {parts}"]
    if doc["runtime"].get("gpus_per_rank"):
        lines.append(f"  host<->GPU copies (not network bytes): host->device "
                     f"{dev.get('host_to_device', 0)}, device->host "
                     f"{dev.get('device_to_host', 0)} bytes")
    return lines


def _memory_lines(doc):
    mem = doc.get("memory")
    if not mem:
        return []
    rss = mem.get("peak_rss_bytes_per_rank") or []
    line = (f"  memory: tile storage per node (model, "
            f"{count_text(doc.get('slices', 1), 'slice')}) max "
            f"{format_bytes(mem['tile_bytes_max'])}")
    if rss:
        line += f"; peak RSS per rank max {format_bytes(max(rss))}"
        model = mem.get("model_peak_bytes_per_rank")
        if model is not None and len(model):
            line += f" (model {format_bytes(max(model))})"
    return [line]
