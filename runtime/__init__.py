"""The StarPU-MPI runtime layer (filled in by the runtime issue)."""
