"""The load of each node's network link, from a node-pair byte matrix.

On a cluster whose nodes each have one full-duplex link of the same bandwidth, a
communication-bound run lasts at least as long as its busiest link needs: the largest,
over nodes and directions, of the bytes a node sends or receives, divided by the
bandwidth. The ratio of two maps' busiest-link bytes is then the model's prediction of
their time ratio when communication dominates.
"""
import numpy as np


def node_link_bytes(pairs):
    """(sent, received) per node, in bytes, from a (P, P) matrix (sender row, receiver
    column; the diagonal is ignored)."""
    pairs = np.array(pairs, dtype=np.int64)
    if pairs.ndim != 2 or pairs.shape[0] != pairs.shape[1]:
        raise ValueError(f"pairs must be a square P x P matrix, got shape {pairs.shape}")
    pairs = pairs - np.diag(np.diag(pairs))
    return pairs.sum(axis=1), pairs.sum(axis=0)


def busiest_link(pairs):
    """The busiest node and its load: ``{"node", "bytes", "sent", "received"}``.

    ``bytes`` is max(sent, received) of that node (full duplex: each direction has the
    link's bandwidth), the largest over all nodes.
    """
    sent, received = node_link_bytes(pairs)
    load = np.maximum(sent, received)
    node = int(np.argmax(load))
    return {"node": node, "bytes": int(load[node]), "sent": int(sent[node]),
            "received": int(received[node])}
