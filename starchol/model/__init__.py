"""The model layer: what a run will cost, computed without running it (pure numpy).

It imports neither StarPU, mpi4py nor h5py, and none of the compiled runtime, so a
planner runs on a laptop without them (``tests/test_layers.py`` imports this package
with all of them blocked). It sits above :mod:`starchol.distributions` (the maps it
models) and below the runtime and :mod:`starchol.linalg` (which record its predictions
beside their measurements).

- :mod:`.volume` - exact inter-node bytes of the factorization (2D and 2.5D), the solve
  and the residual, per node pair; :mod:`.mixed_volume` those of ``solve_mixed``;
  :mod:`.volume_summary` their summaries for reports; :mod:`.rhs_volume` those of the
  solve and residual that keep L and A in place, and the choice between the variants
- :mod:`.operations` - which volume model goes with which operation, bytes per entry
- :mod:`.counts` - flop and task counts, the kernels and their flops
- :mod:`.memory` - memory per node
- :mod:`.plan` - score maps for a run (estimate from the busiest node) and rank them
- :mod:`.platform` - node and network descriptions (speeds, bandwidth, latency)
- :mod:`.link_load` - the load of each node's network link
"""
from .counts import flops, operation_flops, solve_task_count, task_count
from .memory import node_memory
from .mixed_volume import mixed_transfer_pairs_bytes
from .operations import BYTES_PER_ENTRY, bytes_per_entry, predicted_pairs_bytes
from .volume import (leading_term_tiles, residual_transfer_pairs_bytes,
                     solve_transfer_pairs_bytes, transfer_pairs, transfer_pairs_bytes,
                     transfer_pairs_tiles)

__all__ = ["transfer_pairs", "transfer_pairs_tiles", "transfer_pairs_bytes",
           "solve_transfer_pairs_bytes", "residual_transfer_pairs_bytes",
           "mixed_transfer_pairs_bytes", "leading_term_tiles", "predicted_pairs_bytes",
           "BYTES_PER_ENTRY", "bytes_per_entry", "node_memory", "flops", "operation_flops",
           "task_count", "solve_task_count"]
