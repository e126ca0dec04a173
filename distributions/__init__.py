"""Tile -> node maps for the tiled Cholesky (pure Python, no MPI, no StarPU).

Every map has ``nodes``, ``slices``, ``owner(i, j[, s])`` and the vectorised
``owner_map(nt[, s])`` / ``owner_maps(nt)``; build one by name with :func:`get_map`.
"""
from .base import TileMap
from .block_cyclic import BlockCyclic2D
from .custom import (CustomMap, chameleon_pattern, load_custom_map, read_chameleon_text,
                     write_chameleon_text)
from .factory import (MAP_NAMES, MAPS_25D, candidate_maps, get_map, maps_for_nodes,
                      parse_grid, sbc_basic_r, sbc_extended_r, square_grid)
from .sliced import Sliced25D
from .symmetric import affine_plane_map, projective_plane_map, symmetric_map
from .symmetric_block_cyclic import SymmetricBlockCyclic
from .symmetric_pattern import SymmetricPattern

__all__ = [
    "TileMap", "BlockCyclic2D", "SymmetricBlockCyclic", "Sliced25D", "CustomMap",
    "SymmetricPattern", "projective_plane_map", "affine_plane_map", "symmetric_map",
    "MAP_NAMES", "MAPS_25D", "get_map", "candidate_maps", "maps_for_nodes", "parse_grid", "square_grid",
    "sbc_extended_r", "sbc_basic_r", "load_custom_map", "read_chameleon_text",
    "write_chameleon_text", "chameleon_pattern",
]
