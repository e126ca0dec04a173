"""Tiled Cholesky: the exact communication-volume model, the task graph, matrices, I/O."""
