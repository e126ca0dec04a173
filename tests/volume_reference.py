"""A slow, obviously correct count of tiled-Cholesky transfers: the test oracle.

It lists every task of the right-looking algorithm with the node it runs on and the tile
versions it reads, then counts transfers one by one. O(NT^3) Python loops: small NT only.
"""
from collections import Counter


def tasks(owners):
    """Yield (node, [(tile_i, tile_j, version_k, sender_node), ...]) for every task.

    ``owners`` is a list of c owner arrays (one per slice); iteration k uses slice k mod c.
    A tile version (i, j, k) is L[i][j] as produced by iteration k == j.
    """
    c = len(owners)
    nt = len(owners[0])
    for k in range(nt):
        o = owners[k % c]
        yield o[k][k], []  # POTRF reads nothing remote
        for m in range(k + 1, nt):
            yield o[m][k], [(k, k, o[k][k])]  # TRSM(m, k) reads L[k][k]
        for n in range(k + 1, nt):
            yield o[n][n], [(n, k, o[n][k])]  # SYRK(n, k) reads L[n][k]
            for m in range(n + 1, nt):
                yield o[m][n], [(m, k, o[m][k]), (n, k, o[n][k])]  # GEMM(m, n, k)


def reference_pairs(owners, cache=True, weight=None):
    """Counter {(sender, receiver): transfers}, ``weight(i, j)`` per tile if given."""
    if not isinstance(owners, list):
        owners = [owners] if getattr(owners, "ndim", 3) == 2 else list(owners)
    w = weight or (lambda i, j: 1)
    pairs = Counter()
    seen = set()
    for node, operands in tasks(owners):
        for (i, j, sender) in operands:
            if sender == node:
                continue
            key = (i, j, int(node))
            if cache and key in seen:
                continue
            seen.add(key)
            pairs[(int(sender), int(node))] += w(i, j)
    c = len(owners)
    nt = len(owners[0])
    for j in range(nt):
        home = j % c
        updaters = {k % c for k in range(j)}
        for i in range(j, nt):
            for s in updaters - {home}:
                pairs[(int(owners[s][i][j]), int(owners[home][i][j]))] += w(i, j)
    return pairs


def as_matrix(pairs, nodes):
    """Counter -> nodes x nodes list of lists."""
    out = [[0] * nodes for _ in range(nodes)]
    for (a, b), v in pairs.items():
        out[a][b] += v
    return out
