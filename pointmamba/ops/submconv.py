"""Submanifold sparse 3D convolution behind one function: spconv on CUDA, our own gather + matmul in torch
ops elsewhere (``backend.choose("spconv", device)`` decides; see ``backend.py``).

Why our own: spconv's CPU wheel crashes in backward on a CPU-only torch and gave wrong rows and wrong
input gradients with 2 threads. Ours builds a neighbour table (site x kernel offset -> neighbouring site)
from int64 voxel keys of (batch, x, y, z), looked up in a dense key -> site table when the grid box is
small, else with ``torch.searchsorted`` over the sorted keys (half the offsets searched, the mirrored
offset having the same pairs swapped), in batched lookups that read nothing back from the device (the
gathered conv uses the table as it is). From it, a rulebook: the (input site, output site) pairs of every
offset, grouped by offset. The conv is then one dense matmul for the centre offset plus, per chunk
of pairs, one gather, one matmul per offset and one ``index_add_``: work proportional to the pairs that
exist. All of it, neighbour search and rulebook included, is torch ops on the tensors' own device (no
numpy, no numba): on CUDA without spconv it runs on the GPU, in float32 with autocast off (AMP's bfloat16
matmuls would not take our float32 weights in their ``out=`` form).
On a jaw surface most of the K^3 voxels around a site are empty (measured on a 16k-point jaw: 2.4 of 27
neighbours at 0.2 mm, 5.5 / 10.2 / 12.2 at the coarser stages, 5.3 of 125 for the k=5 stem), so this
does 2-10x fewer multiply-adds than gathering all K^3 neighbours with zeros for the empty ones, which is
what this module did before (the 8 convs of a 16k-point training step: 0.69 s -> 0.34 s of profiled
CPU time, forward + backward).
Memory: a chunk's gathered pairs stay under 16 MB.

Weight layout (one for both backends): spconv 2.x's ``KRSC``, ``weight`` of shape
(Cout, kx, ky, kz, Cin) and ``bias`` (Cout,), so a CUDA checkpoint trained with spconv loads here and back.
Offset convention (spconv's and ``F.conv3d``'s cross-correlation): ``out[p] = sum_k W[:, k, :] @
in[p + k - K//2]`` with the kernel axes in the order of ``grid_coord``'s columns (x, y, z).

Rows that share a voxel act as one site (the mean of their features) and all get that site's output;
spconv has no defined behaviour for duplicate voxels, so both backends go through the same site mapping.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from ..point.reductions import segment_reduce
from . import backend
from .submconv_gather import gather_conv

if TYPE_CHECKING:
    from ..point.batch import PointBatch

__all__ = ["NeighbourMap", "build_neighbour_map", "neighbour_map", "sparse_conv", "sparse_conv_backend", "SubMConv3d"]

_CACHE_KEY = "sparse_conv"  # in PointBatch.cache: neighbour maps / spconv tensors per kernel size
# Sites are processed in chunks whose gathered (rows, K^3 * C) block has at most this many elements (16 MB).
_CHUNK_ELEMENTS = 1 << 22
# Neighbour search by a dense voxel -> site table when the (batch x padded extent) box has at most this many
# cells (64 MB of int32), else by binary search over the sorted keys.
_DENSE_TABLE_MAX = 1 << 24


@dataclass
class NeighbourMap:
    """Which site feeds each site through each kernel offset: a dense table, and from it a rulebook.

    ``table`` (sites, K^3) holds the site feeding each site through each flat offset ``(dx * K + dy) * K +
    dz`` (each in 0..K-1, centre K//2), ``num_sites`` where that voxel is empty, the site itself at the
    centre. It is built without reading anything back from the device (on CUDA each read waits for the
    queue: the training step's host waits, issue 45), so the gathered conv never waits for it. The rulebook
    (``pair_in``, ``pair_out``, ``pair_ptr``) is derived on first use: every (input site, output site) pair of
    the non-centre offsets, offset by offset, output sites ascending within an offset; offset o's pairs are
    ``pair_ptr[o]:pair_ptr[o + 1]`` (the centre's range is empty: it pairs every site with itself and is one
    dense matmul). ``site`` (N,) maps rows to sites where voxels hold several rows, else None (rows are sites).
    """

    kernel_size: int
    num_sites: int
    site: Tensor | None
    table: Tensor
    _rulebook: tuple[Tensor, Tensor, list[int]] | None = field(default=None, repr=False)

    @property
    def center(self) -> int:
        return (self.kernel_size**3) // 2

    @property
    def device(self) -> torch.device:
        return self.table.device

    def rulebook(self) -> tuple[Tensor, Tensor, list[int]]:
        """(pair_in, pair_out, pair_ptr), built once (one ``nonzero`` and one read of the counts)."""
        if self._rulebook is None:
            m, k3 = self.num_sites, self.kernel_size**3
            filled = self.table < m
            filled[:, self.center] = False
            pair_offset, pair_out = filled.t().nonzero(as_tuple=True)  # offset-major, sites ascending
            pair_in = self.table[pair_out, pair_offset]
            counts = torch.bincount(pair_offset, minlength=k3).cumsum(0).tolist()
            self._rulebook = (pair_in, pair_out, [0] + counts)
        return self._rulebook

    @property
    def pair_in(self) -> Tensor:
        return self.rulebook()[0]

    @property
    def pair_out(self) -> Tensor:
        return self.rulebook()[1]

    @property
    def pair_ptr(self) -> list[int]:
        return self.rulebook()[2]

    @property
    def num_pairs(self) -> int:
        """Pairs including the centre offset's M self-pairs."""
        return len(self.pair_in) + self.num_sites

    def chunks(self, width: int) -> list[list[tuple[int, int, int]]]:
        """Pieces (offset, start, end) of the rulebook, grouped so that a group's gathered (pairs, width)
        block stays under the chunk budget."""
        rows = max(1, _CHUNK_ELEMENTS // max(1, width))
        groups: list[list[tuple[int, int, int]]] = [[]]
        used = 0
        for o in range(len(self.pair_ptr) - 1):
            for s in range(self.pair_ptr[o], self.pair_ptr[o + 1], rows):
                e = min(s + rows, self.pair_ptr[o + 1])
                if used + e - s > rows:
                    groups.append([])
                    used = 0
                groups[-1].append((o, s, e))
                used += e - s
        return [g for g in groups if g]


def _voxel_keys(grid_coord: Tensor, batch: Tensor, radius: int) -> tuple[Tensor, tuple[int, int, int, int]]:
    """int64 key of (batch, x, y, z) with a margin of ``radius`` cells so neighbour keys never wrap, and the
    key box (samples, x, y, z extents)."""
    if grid_coord.dim() != 2 or grid_coord.shape[1] != 3:
        raise ValueError(f"sparse_conv: grid_coord must be (N, 3), got {tuple(grid_coord.shape)}")
    gc = grid_coord.long()
    lo = int(gc.min())
    if lo < 0:
        raise ValueError(f"sparse_conv: grid_coord must be >= 0, got min {lo}")
    hi = gc.max(0).values.tolist()
    size = tuple(int(h) + 1 + 2 * radius for h in hi)
    num_batches = int(batch.max()) + 1
    if num_batches * math.prod(size) >= 2**62:
        raise ValueError(f"sparse_conv: grid extent {hi} with {num_batches} samples overflows int64 voxel keys")
    g = gc + radius
    key = ((batch.long() * size[0] + g[:, 0]) * size[1] + g[:, 1]) * size[2] + g[:, 2]
    return key, (num_batches, *size)


def build_neighbour_map(grid_coord: Tensor, batch: Tensor, kernel_size: int) -> NeighbourMap:
    """Neighbour map of a submanifold conv with a cubic ``kernel_size`` (odd) over active voxels."""
    if kernel_size < 1 or kernel_size % 2 == 0:
        raise ValueError(f"sparse_conv: kernel_size must be odd and >= 1, got {kernel_size}")
    r = kernel_size // 2
    key, box = _voxel_keys(grid_coord, batch, r)
    size = box[1:]
    sorted_key, perm = torch.sort(key)
    if key.numel() > 1 and bool((sorted_key[1:] == sorted_key[:-1]).any()):
        site_keys, site_of_sorted = torch.unique_consecutive(sorted_key, return_inverse=True)
        site = torch.empty_like(site_of_sorted)
        site[perm] = site_of_sorted
        query = site_keys  # query i is site i
        lookup = torch.arange(len(site_keys), device=key.device)  # sorted position -> site
    else:
        site_keys, site, query, lookup = sorted_key, None, key, perm  # rows are sites
    m = len(site_keys)
    deltas = torch.tensor([(dx * size[1] + dy) * size[2] + dz
                           for dx, dy, dz in itertools.product(range(-r, r + 1), repeat=3)], device=key.device)
    dense = None
    if math.prod(box) <= _DENSE_TABLE_MAX:  # direct lookup: one gather instead of a binary search
        dense = torch.full((math.prod(box),), m, dtype=torch.int32 if m < 2**31 else torch.long, device=key.device)
        dense[site_keys] = lookup.to(dense.dtype)
    # looked up in groups of offsets that keep a (sites, group) block of keys under the chunk budget (the
    # margin keeps every key inside the box); nothing here reads back from the device. The dense table
    # looks every offset up (cheaper than the scatter below); the binary search only the first half, the
    # mirrored offset having the same pairs swapped, written by one scatter whose misses land in a spare row
    todo = len(deltas) if dense is not None else len(deltas) // 2
    group = max(1, _CHUNK_ELEMENTS // max(1, m))
    parts = []
    for lo in range(0, todo, group):
        q = query[:, None] + deltas[None, lo:min(lo + group, todo)]
        if dense is not None:
            parts.append(dense[q].long())
        else:
            pos = torch.searchsorted(site_keys, q).clamp_(max=m - 1)
            parts.append(torch.where(site_keys[pos] == q, lookup[pos], m))
    looked = torch.cat(parts, 1) if len(parts) > 1 else parts[0]
    if dense is not None:
        table = looked
    else:
        half, sites = todo, torch.arange(m, device=key.device)
        table = torch.full((m + 1, len(deltas)), m, dtype=torch.long, device=key.device)
        table[:m, :half] = looked
        table[looked, torch.arange(len(deltas) - 1, half, -1, device=key.device)] = sites[:, None].expand(m, half)
        table[:m, half] = sites
        table = table[:m]
    return NeighbourMap(kernel_size, m, site, table)


def _cache(point: PointBatch) -> dict:
    """The per-PointBatch cache, reset when ``grid_coord`` or ``batch`` was replaced."""
    holder = point.cache.get(_CACHE_KEY)
    if holder is None or holder[0] is not point.grid_coord or holder[1] is not point.batch:
        holder = point.cache[_CACHE_KEY] = (point.grid_coord, point.batch, {})
    return holder[2]


def neighbour_map(point: PointBatch, kernel_size: int) -> NeighbourMap:
    """The neighbour map of ``point`` (a PointBatch) for ``kernel_size``, cached in ``point.cache``.

    Convs at one resolution share the map; it is rebuilt when ``point.grid_coord`` or ``point.batch`` is
    replaced by another tensor (not when one is modified in place) or moved to another device.
    """
    cache = _cache(point)
    nbr = cache.get(("ours", kernel_size))
    if nbr is None or nbr.device != point.grid_coord.device:
        nbr = build_neighbour_map(point.grid_coord, point.batch, kernel_size)
        cache[("ours", kernel_size)] = nbr
    return nbr


class _SubMConvFunction(torch.autograd.Function):
    """Rulebook conv: the centre offset as one matmul, every other offset over its pairs only.

    out[i] = in[i] @ W_c + sum over pairs (j -> i) of offset o of in[j] @ W_o, with W_o = weight[:, o, :]^T.
    Backward: grad_in[j] = grad_out[j] @ W_c^T + sum over pairs (j -> i) of grad_out[i] @ W_o^T, and
    grad W_o = sum over pairs in[j]^T grad_out[i].
    """

    @staticmethod
    def forward(ctx, feat: Tensor, weight: Tensor, nbr: NeighbourMap) -> Tensor:  # noqa: ANN001
        wk = _per_offset(weight)  # (K^3, Cin, Cout)
        out = feat @ wk[nbr.center]
        for group in nbr.chunks(max(wk.shape[1], wk.shape[2])):
            _accumulate(out, feat, wk, group, nbr.pair_in, nbr.pair_out, transpose=False)
        ctx.save_for_backward(feat, weight)
        ctx.nbr = nbr
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None, None]:  # noqa: ANN001
        feat, weight = ctx.saved_tensors
        nbr: NeighbourMap = ctx.nbr
        grad_out = grad_out.contiguous()
        wk = _per_offset(weight)
        groups = nbr.chunks(max(wk.shape[1], wk.shape[2]))
        grad_feat = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_feat = grad_out @ wk[nbr.center].t()
            for group in groups:
                _accumulate(grad_feat, grad_out, wk, group, nbr.pair_out, nbr.pair_in, transpose=True)
        if ctx.needs_input_grad[1]:
            gwk = torch.zeros_like(wk)
            torch.mm(feat.t(), grad_out, out=gwk[nbr.center])
            for group in groups:
                lo, hi = group[0][1], group[-1][2]
                src = feat.index_select(0, nbr.pair_in[lo:hi])
                dst = grad_out.index_select(0, nbr.pair_out[lo:hi])
                for o, s, e in group:
                    gwk[o].addmm_(src[s - lo:e - lo].t(), dst[s - lo:e - lo])
            grad_w = gwk.permute(2, 0, 1).reshape(weight.shape)
        return grad_feat, grad_w, None


def _per_offset(weight: Tensor) -> Tensor:
    """(Cout, K, K, K, Cin) -> (K^3, Cin, Cout): W_o per flat offset, ready to right-multiply rows."""
    cout, cin = weight.shape[0], weight.shape[-1]
    return weight.reshape(cout, -1, cin).permute(1, 2, 0).contiguous()


def _accumulate(out: Tensor, src: Tensor, wk: Tensor, group: list[tuple[int, int, int]], gather: Tensor,
                scatter: Tensor, transpose: bool) -> None:
    """out[scatter[p]] += src[gather[p]] @ W_o (W_o^T if ``transpose``) for the pairs p of ``group``."""
    lo, hi = group[0][1], group[-1][2]
    rows = src.index_select(0, gather[lo:hi])
    prod = rows.new_empty(hi - lo, wk.shape[1] if transpose else wk.shape[2])
    for o, s, e in group:
        torch.mm(rows[s - lo:e - lo], wk[o].t() if transpose else wk[o], out=prod[s - lo:e - lo])
    out.index_add_(0, scatter[lo:hi], prod)


def _to_sites(feat: Tensor, site: Tensor | None, num_sites: int) -> Tensor:
    return feat if site is None else segment_reduce(feat, site, num_sites, "mean")


def _sites_of(point: PointBatch) -> tuple[Tensor | None, int, Tensor]:
    """(site per row or None, number of sites, a representative row per site) for the spconv path."""
    cache = _cache(point)
    if "sites" not in cache:
        key, _ = _voxel_keys(point.grid_coord, point.batch, 0)
        uniq, site = torch.unique(key, return_inverse=True)
        if len(uniq) == len(key):
            cache["sites"] = (None, len(key), torch.arange(len(key), device=key.device))
        else:
            rep = torch.empty(len(uniq), dtype=torch.long, device=key.device)
            rep[site] = torch.arange(len(key), device=key.device)
            cache["sites"] = (site, len(uniq), rep)
    return cache["sites"]


def _spconv_conv(feat: Tensor, point: PointBatch, weight: Tensor, bias: Tensor | None, holder: dict) -> Tensor:
    """spconv SubMConv3d with our weight and bias."""
    spconv = backend.extension("spconv")
    cout, k, cin = weight.shape[0], weight.shape[1], weight.shape[-1]
    module = holder.get(k)
    if module is None:
        module = spconv.SubMConv3d(cin, cout, k, bias=bias is not None, indice_key=f"pm_subm{k}").to(feat.device)
        holder[k] = module
    site, num_sites, rep = _sites_of(point)
    cache = _cache(point)
    # spconv builds a submanifold conv's backward pairs only in training mode and reuses whatever pairs
    # its indice_key holds: pairs made without grad, reused with grad, fail in backward ("!indices.empty()",
    # seen on an H200 when one batch went through a model without grad, then another with). One cached
    # tensor per mode.
    training = torch.is_grad_enabled()
    key = ("spconv", training)
    x = cache.get(key)
    site_feat = _to_sites(feat, site, num_sites).contiguous()
    if x is None:
        indices = torch.cat([point.batch[rep, None], point.grid_coord[rep]], 1).int().contiguous()
        shape = (point.grid_coord.max(0).values + 1).tolist()
        x = spconv.SparseConvTensor(site_feat, indices, shape, point.num_samples)
    else:
        x = x.replace_feature(site_feat)
    module.train(training)
    params = {"weight": weight} if bias is None else {"weight": weight, "bias": bias}
    out = torch.func.functional_call(module, params, (x,))
    cache[key] = out  # carries the indice pairs (indice_key) for the next conv at this resolution
    return out.features if site is None else out.features[site]


def sparse_conv_backend(tensor: Tensor) -> str:
    """The backend ``sparse_conv`` uses for inputs living where ``tensor`` lives: "spconv", "torch" (the
    rulebook conv) or "gather" (``submconv_gather.py``; see ``backend.py``)."""
    return backend.choose("spconv", tensor.device)


def sparse_conv(feat: Tensor, point: PointBatch, weight: Tensor, bias: Tensor | None = None, _holder: dict | None = None) -> Tensor:
    """Submanifold conv of row features ``feat`` (N, Cin) over ``point``'s voxels -> (N, Cout).

    ``weight`` (Cout, K, K, K, Cin) (spconv 2.x layout), ``bias`` (Cout,) or None. CUDA tensors go to
    spconv when it imports, everything else (and CUDA without spconv) to our rulebook gather + matmul;
    ``POINTMAMBA_BACKEND_SPCONV=gather`` to the gathered conv (one matmul per conv, ``submconv_gather.py``).
    """
    if weight.dim() != 5 or not (weight.shape[1] == weight.shape[2] == weight.shape[3]):
        raise ValueError(f"sparse_conv: weight must be (Cout, K, K, K, Cin), got {tuple(weight.shape)}")
    if feat.dim() != 2 or feat.shape[1] != weight.shape[-1]:
        raise ValueError(f"sparse_conv: feat must be (N, Cin={weight.shape[-1]}), got {tuple(feat.shape)}")
    if point.grid_coord is None:
        raise ValueError("sparse_conv: the PointBatch has no grid_coord (build it with grid_size or grid_coord)")
    if feat.shape[0] != len(point):
        raise ValueError(f"sparse_conv: feat has {feat.shape[0]} rows but the batch has {len(point)} points")
    name = sparse_conv_backend(feat)
    if name == "spconv":
        return _spconv_conv(feat, point, weight, bias, _holder if _holder is not None else {})
    nbr = neighbour_map(point, weight.shape[1])
    cdt = torch.float64 if torch.float64 in (feat.dtype, weight.dtype) else torch.float32
    with torch.autocast(device_type=feat.device.type, enabled=False):
        site_feat = _to_sites(feat.to(cdt), nbr.site, nbr.num_sites)
        if name == "gather":
            out = gather_conv(site_feat, weight.to(cdt), nbr)
        else:
            out = _SubMConvFunction.apply(site_feat, weight.to(cdt), nbr)
        if nbr.site is not None:
            out = out[nbr.site]
        return out if bias is None else out + bias.to(cdt)


class SubMConv3d(nn.Module):
    """Submanifold 3D conv with a cubic kernel; ``forward(feat (N, Cin), point) -> (N, Cout)``.

    Parameters ``weight`` (Cout, K, K, K, Cin) and ``bias`` (Cout,), spconv 2.x's layout and names.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, bias: bool = True) -> None:
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"SubMConv3d: kernel_size must be odd and >= 1, got {kernel_size}")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        k = kernel_size
        self.weight = nn.Parameter(torch.empty(out_channels, k, k, k, in_channels))
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self._spconv_holder: dict = {}  # spconv module per kernel size, outside the state dict
        self.reset_parameters()

    def reset_parameters(self) -> None:
        fan_in = self.in_channels * self.kernel_size**3
        bound = 1.0 / math.sqrt(fan_in)
        nn.init.uniform_(self.weight, -bound, bound)  # torch Conv3d's default (kaiming_uniform a=sqrt(5))
        if self.bias is not None:
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, feat: Tensor, point: PointBatch) -> Tensor:
        return sparse_conv(feat, point, self.weight, self.bias, self._spconv_holder)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, bias={self.bias is not None}"
