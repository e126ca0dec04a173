"""Pictures of a map: the lower triangle of tiles coloured by owner node (matplotlib)."""
import numpy as np


def node_colors(nodes):
    """One RGBA colour per node: tab20 up to 20 nodes, else a hue wheel in a fixed shuffle."""
    import matplotlib

    if nodes <= 20:
        cmap = matplotlib.colormaps["tab20"]
        return np.array([cmap(k) for k in range(nodes)])
    cmap = matplotlib.colormaps["hsv"]
    order = np.random.default_rng(12345).permutation(nodes)
    return np.array([cmap(order[k] / nodes) for k in range(nodes)])


def draw_map(tile_map, nt, path, title=None):
    """Save a PNG of the map on an nt x nt tiled matrix (one panel per slice).

    Tile (i, j), i >= j, is drawn at row i, column j in its owner's colour; the upper
    triangle is left white. Node ids are written in the tiles when nt <= 24.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    owners = tile_map.owner_maps(nt)
    colors = node_colors(tile_map.nodes)
    c = owners.shape[0]
    fig, axes = plt.subplots(1, c, figsize=(min(5 * c, 20), 5.4), squeeze=False)
    lower = np.tril(np.ones((nt, nt), dtype=bool))
    for s, ax in enumerate(axes[0]):
        img = np.ones((nt, nt, 4))
        img[lower] = colors[owners[s][lower]]
        ax.imshow(img, interpolation="nearest")
        if nt <= 24:
            for i in range(nt):
                for j in range(i + 1):
                    ax.text(j, i, str(owners[s, i, j]), ha="center", va="center", fontsize=7)
        ax.set_xlabel("tile column j")
        ax.set_ylabel("tile row i")
        if c > 1:
            ax.set_title(f"slice {s} (runs iterations k = {s} mod {c})", fontsize=9)
    fig.suptitle(title or f"{tile_map}, NT = {nt}")
    fig.tight_layout()
    from ..files import atomic_path

    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=100, format="png")
    finally:
        plt.close(fig)
