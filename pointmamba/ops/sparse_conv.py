"""Submanifold sparse 3D convolution behind one function: spconv on CUDA, our own gather + matmul elsewhere.

Why our own: spconv's CPU wheel crashes in backward on a CPU-only torch and gave wrong rows and wrong
input gradients with 2 threads. Ours builds a neighbour table (site x kernel offset -> neighbouring site)
from int64 voxel keys of (batch, x, y, z), looked up in a dense key -> site table when the grid box is
small, else with ``torch.searchsorted`` over the sorted keys (only half the offsets are searched: the
mirrored offset has the same pairs swapped). The conv is an implicit GEMM: per chunk of sites, gather
the K^3 neighbours' features (zeros where empty) and multiply once by the (K^3 * Cin, Cout) kernel. It
never materialises (N, K^3, Cin) for all sites at once (a chunk stays under 16 MB), and a few large ops
replace a gather/matmul/scatter per offset (hundreds of small ops, each slow on a loaded machine).
Measured on a 120k-point jaw (72k sites), forward + backward: k=5, Cin=6 ~ +50 MB peak memory and
k=3, Cin=32 ~ +70 MB, vs ~+490 / +510 MB for gathering (N, K^3, Cin) at once.

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
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..segment import segment_reduce

__all__ = ["NeighbourMap", "build_neighbour_map", "neighbour_map", "sparse_conv", "SubMConv3d"]

_CACHE_KEY = "_sparse_conv_cache"  # in PointBatch.extra: neighbour maps / spconv tensors per kernel size
# Sites are processed in chunks whose gathered (rows, K^3 * C) block has at most this many elements (16 MB).
_CHUNK_ELEMENTS = 1 << 22
# Neighbour search by a dense voxel -> site table when the (batch x padded extent) box has at most this many
# cells (64 MB of int32), else by binary search over the sorted keys.
_DENSE_TABLE_MAX = 1 << 24


@dataclass
class NeighbourMap:
    """Which site feeds each site through each kernel offset.

    ``table`` (M, K^3) holds, for every site and flat kernel offset ``(dx * K + dy) * K + dz`` (each in
    0..K-1, centre K//2), the neighbouring site, or M (the index of an appended zero row) where that voxel
    is empty. ``site`` (N,) maps rows to sites where voxels hold several rows, else None (rows are sites).
    """

    kernel_size: int
    num_sites: int
    site: Tensor | None
    table: Tensor

    @property
    def center(self) -> int:
        return (self.kernel_size**3) // 2

    @property
    def device(self) -> torch.device:
        return self.table.device

    @property
    def num_pairs(self) -> int:
        return int((self.table < self.num_sites).sum())

    def chunks(self, width: int) -> list[tuple[int, int]]:
        """Site ranges whose gathered (rows, K^3 * width) block stays under the chunk budget."""
        rows = max(1, _CHUNK_ELEMENTS // max(1, self.table.shape[1] * width))
        return [(s, min(s + rows, self.num_sites)) for s in range(0, self.num_sites, rows)]


def _voxel_keys(grid_coord: Tensor, batch: Tensor, radius: int) -> tuple[Tensor, tuple[int, int, int]]:
    """int64 key of (batch, x, y, z) with a margin of ``radius`` cells so neighbour keys never wrap."""
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
    return key, size


def build_neighbour_map(grid_coord: Tensor, batch: Tensor, kernel_size: int) -> NeighbourMap:
    """Neighbour map of a submanifold conv with a cubic ``kernel_size`` (odd) over active voxels."""
    if kernel_size < 1 or kernel_size % 2 == 0:
        raise ValueError(f"sparse_conv: kernel_size must be odd and >= 1, got {kernel_size}")
    r = kernel_size // 2
    key, size = _voxel_keys(grid_coord, batch, r)
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
    offsets = list(itertools.product(range(-r, r + 1), repeat=3))
    total = int(batch.max()) + 1
    for extent in size:
        total *= extent
    dense = None
    if total <= _DENSE_TABLE_MAX:  # direct lookup: one gather per offset instead of a binary search
        dense = torch.full((total,), -1, dtype=torch.int32 if m < 2**31 else torch.long, device=key.device)
        dense[site_keys] = lookup.to(dense.dtype)
    found: dict[int, tuple[Tensor, Tensor]] = {}
    for flat, (dx, dy, dz) in enumerate(offsets[: len(offsets) // 2]):
        q = query + (dx * size[1] + dy) * size[2] + dz  # the margin keeps q inside the key range
        if dense is not None:
            hit_site = dense[q]
            out_idx = (hit_site >= 0).nonzero().squeeze(1)
            in_idx = hit_site[out_idx].long()
        else:
            pos = torch.searchsorted(site_keys, q).clamp_(max=m - 1)
            out_idx = (site_keys[pos] == q).nonzero().squeeze(1)
            in_idx = lookup[pos[out_idx]]
        if out_idx.numel():
            found[flat] = (out_idx, in_idx)
            found[len(offsets) - 1 - flat] = (in_idx, out_idx)  # the mirrored offset: the same pairs swapped
    table = torch.full((m, len(offsets)), m, dtype=torch.int32 if m < 2**31 - 1 else torch.long, device=key.device)
    table[:, len(offsets) // 2] = torch.arange(m, device=key.device, dtype=table.dtype)
    for flat, (out_idx, in_idx) in found.items():
        table[out_idx, flat] = in_idx.to(table.dtype)
    return NeighbourMap(kernel_size, m, site, table)


def _cache(point: object) -> dict:
    """The per-PointBatch cache, reset when ``grid_coord`` or ``batch`` was replaced."""
    holder = point.extra.get(_CACHE_KEY)
    if holder is None or holder[0] is not point.grid_coord or holder[1] is not point.batch:
        holder = point.extra[_CACHE_KEY] = (point.grid_coord, point.batch, {})
    return holder[2]


def neighbour_map(point: object, kernel_size: int) -> NeighbourMap:
    """The neighbour map of ``point`` (a PointBatch) for ``kernel_size``, cached in ``point.extra``.

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
    """Implicit GEMM over chunks of sites: gather the K^3 neighbours of each site, one matmul per chunk.

    Backward needs no scatter: the submanifold neighbour relation is symmetric (j is i's neighbour at
    offset o iff i is j's at the mirrored offset), so the input gradient is the same gather over
    ``grad_out`` with the kernel mirrored and transposed.
    """

    @staticmethod
    def forward(ctx, feat: Tensor, weight: Tensor, nbr: NeighbourMap) -> Tensor:  # noqa: ANN001
        cout, cin = weight.shape[0], weight.shape[-1]
        w = weight.reshape(cout, -1, cin).permute(1, 2, 0).reshape(-1, cout)  # rows (offset, cin)
        out = feat.new_empty(nbr.num_sites, cout)
        padded = torch.cat([feat, feat.new_zeros(1, cin)])
        for a, b in nbr.chunks(cin):
            torch.mm(_gather(padded, nbr.table[a:b]), w, out=out[a:b])
        ctx.save_for_backward(feat, weight)
        ctx.nbr = nbr
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None, None]:  # noqa: ANN001
        feat, weight = ctx.saved_tensors
        nbr: NeighbourMap = ctx.nbr
        cout, cin = weight.shape[0], weight.shape[-1]
        grad_out = grad_out.contiguous()
        grad_feat = grad_w = None
        if ctx.needs_input_grad[0]:
            # rows (offset o', cout) hold W[:, mirror(o'), :]^T
            w_t = weight.reshape(cout, -1, cin).permute(1, 0, 2).flip(0).reshape(-1, cin)
            padded = torch.cat([grad_out, grad_out.new_zeros(1, cout)])
            grad_feat = grad_out.new_empty(nbr.num_sites, cin)
            for a, b in nbr.chunks(cout):
                torch.mm(_gather(padded, nbr.table[a:b]), w_t, out=grad_feat[a:b])
        if ctx.needs_input_grad[1]:
            padded = torch.cat([feat, feat.new_zeros(1, cin)])
            gw = feat.new_zeros(nbr.table.shape[1] * cin, cout)
            for a, b in nbr.chunks(cin):
                gw.addmm_(_gather(padded, nbr.table[a:b]).t(), grad_out[a:b])
            grad_w = gw.view(nbr.table.shape[1], cin, cout).permute(2, 0, 1).reshape(weight.shape)
        return grad_feat, grad_w, None


def _gather(padded: Tensor, table: Tensor) -> Tensor:
    """(rows, K^3 * C): the features of every site's neighbours, zeros where the voxel is empty."""
    return padded.index_select(0, table.reshape(-1)).view(table.shape[0], -1)


def _to_sites(feat: Tensor, site: Tensor | None, num_sites: int) -> Tensor:
    return feat if site is None else segment_reduce(feat, site, num_sites, "mean")


def _sites_of(point: object) -> tuple[Tensor | None, int, Tensor]:
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


def _spconv_conv(feat: Tensor, point: object, weight: Tensor, bias: Tensor | None, holder: dict) -> Tensor | None:
    """spconv SubMConv3d with our weight and bias; None when spconv cannot be used."""
    try:
        import spconv.pytorch as spconv  # noqa: PLC0415 - CUDA-only dependency, imported lazily
    except Exception:  # noqa: BLE001 - any import failure means "use ours"
        return None
    cout, k, cin = weight.shape[0], weight.shape[1], weight.shape[-1]
    module = holder.get(k)
    if module is None:
        module = spconv.SubMConv3d(cin, cout, k, bias=bias is not None, indice_key=f"pm_subm{k}").to(feat.device)
        holder[k] = module
    site, num_sites, rep = _sites_of(point)
    cache = _cache(point)
    x = cache.get("spconv")
    site_feat = _to_sites(feat, site, num_sites).contiguous()
    if x is None:
        indices = torch.cat([point.batch[rep, None], point.grid_coord[rep]], 1).int().contiguous()
        shape = (point.grid_coord.max(0).values + 1).tolist()
        x = spconv.SparseConvTensor(site_feat, indices, shape, point.num_samples)
    else:
        x = x.replace_feature(site_feat)
    module.train(torch.is_grad_enabled())
    params = {"weight": weight} if bias is None else {"weight": weight, "bias": bias}
    out = torch.func.functional_call(module, params, (x,))
    cache["spconv"] = out  # carries the indice pairs (indice_key) for the next conv at this resolution
    return out.features if site is None else out.features[site]


def sparse_conv(feat: Tensor, point: object, weight: Tensor, bias: Tensor | None = None, _holder: dict | None = None) -> Tensor:
    """Submanifold conv of row features ``feat`` (N, Cin) over ``point``'s voxels -> (N, Cout).

    ``weight`` (Cout, K, K, K, Cin) (spconv 2.x layout), ``bias`` (Cout,) or None. CUDA tensors go to
    spconv when it imports, everything else (and CUDA without spconv) to our gather + matmul.
    """
    if weight.dim() != 5 or not (weight.shape[1] == weight.shape[2] == weight.shape[3]):
        raise ValueError(f"sparse_conv: weight must be (Cout, K, K, K, Cin), got {tuple(weight.shape)}")
    if feat.dim() != 2 or feat.shape[1] != weight.shape[-1]:
        raise ValueError(f"sparse_conv: feat must be (N, Cin={weight.shape[-1]}), got {tuple(feat.shape)}")
    if point.grid_coord is None:
        raise ValueError("sparse_conv: the PointBatch has no grid_coord (build it with grid_size or grid_coord)")
    if feat.shape[0] != len(point):
        raise ValueError(f"sparse_conv: feat has {feat.shape[0]} rows but the batch has {len(point)} points")
    if feat.is_cuda:
        out = _spconv_conv(feat, point, weight, bias, _holder if _holder is not None else {})
        if out is not None:
            return out
    nbr = neighbour_map(point, weight.shape[1])
    out = _SubMConvFunction.apply(_to_sites(feat, nbr.site, nbr.num_sites), weight, nbr)
    if nbr.site is not None:
        out = out[nbr.site]
    return out if bias is None else out + bias


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

    def forward(self, feat: Tensor, point: object) -> Tensor:
        return sparse_conv(feat, point, self.weight, self.bias, self._spconv_holder)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, bias={self.bias is not None}"
