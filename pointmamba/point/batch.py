"""The point batch: several scans packed into one set of rows, with their grid and curve orders.

Rows are grouped by sample; ``offset`` holds cumulative end indices (Pointcept's convention), ``batch``
the sample index per row. ``serialize`` builds, for each space-filling-curve order k, ``order[k]``
(sequence position -> row) and ``inverse[k]`` (row -> sequence position): a mixer sees ``x[order[k]]``
and results come back with ``y[inverse[k]]``.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from .reductions import batch2offset, offset2batch, offset2lengths, segment_reduce
from .serialization import ORDERS, encode_orders

DEFAULT_ORDERS = ORDERS  # serialize along every curve unless told otherwise


class PointBatch:
    """Packed points of B samples.

    Attributes: ``coord`` (N,3) float, ``feat`` (N,C), ``offset`` (B,) int64, ``batch`` (N,) int64,
    ``grid_size``, ``grid_coord`` (N,3) int64 (per-sample origin, so a scan's grid does not depend on
    its batch mates), and after ``serialize``: ``orders`` (names), ``code``/``order``/``inverse`` (K,N).
    ``extra`` holds anything else carried along (labels, vertex maps), row-aligned or not.
    """

    def __init__(
        self,
        coord: Tensor,
        feat: Tensor | None = None,
        offset: Tensor | None = None,
        batch: Tensor | None = None,
        grid_size: float | None = None,
        grid_coord: Tensor | None = None,
        **extra: object,
    ) -> None:
        if not isinstance(coord, Tensor) or coord.dim() != 2 or coord.shape[1] != 3:
            shape = tuple(coord.shape) if isinstance(coord, Tensor) else type(coord).__name__
            raise ValueError(f"PointBatch: coord must be a (N, 3) tensor, got {shape}")
        n = coord.shape[0]
        if n == 0:
            raise ValueError("PointBatch: empty batch (0 points)")
        if not coord.is_floating_point():
            coord = coord.float()
        if not torch.isfinite(coord).all():
            bad = int((~torch.isfinite(coord)).any(1).sum())
            raise ValueError(f"PointBatch: coord has {bad} row(s) with NaN or inf")
        if feat is None:
            feat = coord
        if feat.dim() != 2 or feat.shape[0] != n:
            raise ValueError(f"PointBatch: feat must be (N={n}, C), got {tuple(feat.shape)}")
        if offset is None and batch is None:
            offset = torch.tensor([n], device=coord.device)
        if offset is not None:
            offset = torch.as_tensor(offset, device=coord.device).long()
            if offset.dim() != 1 or len(offset) == 0:
                raise ValueError(f"PointBatch: offset must be a non-empty 1-D tensor, got {tuple(offset.shape)}")
            lengths = offset2lengths(offset)
            if (lengths <= 0).any():
                raise ValueError(f"PointBatch: offset must be strictly increasing and positive, got {offset.tolist()}")
            if int(offset[-1]) != n:
                raise ValueError(f"PointBatch: offset ends at {int(offset[-1])} but there are {n} points")
            derived = offset2batch(offset)
            if batch is not None and not torch.equal(torch.as_tensor(batch, device=coord.device).long(), derived):
                raise ValueError("PointBatch: batch and offset disagree")
            batch = derived
        else:
            batch = torch.as_tensor(batch, device=coord.device).long()
            if batch.shape != (n,):
                raise ValueError(f"PointBatch: batch must be (N={n},), got {tuple(batch.shape)}")
            if (batch.diff() < 0).any() or int(batch[0]) != 0 or (batch.diff() > 1).any():
                raise ValueError("PointBatch: batch must be sorted, start at 0 and have no empty sample")
            offset = batch2offset(batch)
        self.coord = coord
        self.feat = feat
        self.offset = offset
        self.batch = batch
        self.grid_size = grid_size
        if grid_coord is None and grid_size is not None:
            grid_coord = self.voxelize(coord, batch, len(offset), grid_size)
        if grid_coord is not None and (grid_coord.shape != (n, 3)):
            raise ValueError(f"PointBatch: grid_coord must be (N={n}, 3), got {tuple(grid_coord.shape)}")
        self.grid_coord = grid_coord
        self.orders: tuple[str, ...] = ()
        self.depth: int | None = None
        self.code: Tensor | None = None
        self.order: Tensor | None = None
        self.inverse: Tensor | None = None
        self.extra = dict(extra)
        self.cache: dict[str, object] = {}

    def clear_cache(self) -> None:
        """Drop what models cached on this batch (sparse-conv neighbour maps, RelPos step vectors); they are
        rebuilt on the next use. Entries are also rebuilt by themselves when the tensors they were built
        from (``grid_coord``, ``order``) are replaced."""
        self.cache.clear()

    # ------------------------------------------------------------------ construction helpers
    @staticmethod
    def voxelize(coord: Tensor, batch: Tensor, num_samples: int, grid_size: float) -> Tensor:
        """Integer grid coordinates from each sample's own minimum corner."""
        if grid_size <= 0:
            raise ValueError(f"PointBatch: grid_size must be > 0, got {grid_size}")
        origin = segment_reduce(coord, batch, num_samples, "min")[batch]
        return torch.floor((coord - origin) / grid_size).long()

    @classmethod
    def from_list(cls, coords: Sequence[Tensor], feats: Sequence[Tensor] | None = None, **kw: object) -> "PointBatch":
        """Pack a list of per-sample (Ni, 3) coordinates (and (Ni, C) features)."""
        if len(coords) == 0:
            raise ValueError("PointBatch.from_list: empty batch (no samples)")
        coord = torch.cat(list(coords), 0)
        feat = torch.cat(list(feats), 0) if feats is not None else None
        offset = torch.cumsum(torch.tensor([len(c) for c in coords]), 0)
        return cls(coord, feat, offset=offset, **kw)

    # ------------------------------------------------------------------ properties
    @property
    def num_samples(self) -> int:
        return len(self.offset)

    @property
    def lengths(self) -> Tensor:
        return offset2lengths(self.offset)

    def __len__(self) -> int:
        return self.coord.shape[0]

    # ------------------------------------------------------------------ serialization
    def serialize(
        self,
        orders: Sequence[str] = DEFAULT_ORDERS,
        depth: int | None = None,
        shuffle: bool = False,
        generator: torch.Generator | None = None,
    ) -> "PointBatch":
        """Compute ``code``, ``order`` and ``inverse`` for each curve order (in place; returns self).

        ``shuffle`` permutes which curve each row k uses (training-time augmentation, as PTv3 does).
        ``depth`` None picks the smallest depth that holds the grid extent.
        """
        if self.grid_coord is None:
            raise ValueError("PointBatch.serialize: needs grid_coord (give grid_size or grid_coord)")
        orders = tuple(orders)
        for o in orders:
            if o not in ORDERS:
                raise ValueError(f"PointBatch.serialize: unknown order {o!r}; valid: {ORDERS}")
        if shuffle:
            perm = torch.randperm(len(orders), generator=generator).tolist()
            orders = tuple(orders[i] for i in perm)
        codes, depth = encode_orders(self.grid_coord, self.batch, orders, depth, self.num_samples)
        code = torch.stack(codes, 0)
        order = torch.argsort(code, dim=1, stable=True)
        # Points sharing a voxel share every code. Break such ties by coordinate, not by row index, so that
        # permuting the input rows permutes every serialized order consistently: sort again, stably, from a
        # row sequence that lists the tied rows in coordinate order (the other rows' codes are unique).
        if code.shape[0]:
            first = code[0][order[0]]
            same = first[1:] == first[:-1]
            if same.any():
                in_tie = torch.zeros_like(first, dtype=torch.bool)
                in_tie[1:] |= same
                in_tie[:-1] |= same
                tied = order[0][in_tie]
                tied = tied[self._lexsort_rows(self.coord[tied])]
                start = torch.cat([order[0][~in_tie], tied])
                order = start[torch.argsort(code[:, start], dim=1, stable=True)]
        inverse = torch.empty_like(order).scatter_(1, order, torch.arange(code.shape[1], device=code.device).expand_as(order))
        self.orders, self.code, self.order, self.inverse = orders, code, order, inverse
        self.depth = depth
        return self

    @staticmethod
    def _lexsort_rows(coord: Tensor) -> Tensor:
        """Row permutation sorting ``coord`` (N, 3) lexicographically by x, then y, then z."""
        perm = torch.argsort(coord[:, 2], stable=True)
        for axis in (1, 0):
            perm = perm[torch.argsort(coord[perm, axis], stable=True)]
        return perm

    def to(self, device: torch.device | str) -> "PointBatch":
        """Move every tensor to ``device`` (in place; returns self)."""
        for name, value in list(vars(self).items()):
            if isinstance(value, Tensor):
                setattr(self, name, value.to(device))
        self.extra = {k: (v.to(device) if isinstance(v, Tensor) else v) for k, v in self.extra.items()}
        return self
