"""Submanifold sparse 3D convolution behind one function: spconv on CUDA, our own gather + matmul elsewhere.

Why our own: spconv's CPU wheel crashes in backward on a CPU-only torch and gave wrong rows and wrong
input gradients with 2 threads. Ours builds a neighbour map by hashing voxel keys (int64 keys of
(batch, x, y, z), sorted, looked up with ``torch.searchsorted``) and loops over the kernel offsets
(gather the neighbours of one offset, one matmul, ``index_add_``), so it never materialises
(N, K^3, Cin); a custom backward re-gathers instead of saving the gathered rows.

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
# Pairs of several offsets are multiplied into one buffer of at most this many elements and scattered with
# one index_add_: per-offset index_add_ calls cost ~ the output size each on CPU, one per group does not.
_CHUNK_ELEMENTS = 1 << 22


@dataclass
class NeighbourMap:
    """Which site feeds which site through each kernel offset.

    ``site`` (N,) maps rows to sites where voxels hold several rows, else None (rows are the sites).
    ``out_idx``/``in_idx`` (P,) hold the pairs of every non-centre offset, one block per offset;
    ``blocks`` lists (flat offset index, start, end). The centre offset maps every site to itself and is
    not stored.
    """

    kernel_size: int
    num_sites: int
    site: Tensor | None
    out_idx: Tensor
    in_idx: Tensor
    blocks: list[tuple[int, int, int]]

    @property
    def center(self) -> int:
        return (self.kernel_size**3) // 2

    @property
    def device(self) -> torch.device:
        return self.out_idx.device

    @property
    def num_pairs(self) -> int:
        return self.num_sites + self.out_idx.numel()

    def groups(self, width: int) -> list[list[tuple[int, int, int]]]:
        """Consecutive offset blocks whose pairs times ``width`` stay under the chunk budget."""
        limit = max(1, _CHUNK_ELEMENTS // max(1, width))
        out: list[list[tuple[int, int, int]]] = [[]]
        rows = 0
        for blk in self.blocks:
            if out[-1] and rows + blk[2] - blk[1] > limit:
                out.append([])
                rows = 0
            out[-1].append(blk)
            rows += blk[2] - blk[1]
        return [g for g in out if g]


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
    found: dict[int, tuple[Tensor, Tensor]] = {}
    for flat, (dx, dy, dz) in enumerate(offsets[: len(offsets) // 2]):
        delta = (dx * size[1] + dy) * size[2] + dz
        q = query + delta
        pos = torch.searchsorted(site_keys, q).clamp_(max=m - 1)
        hit = site_keys[pos] == q
        out_idx = hit.nonzero().squeeze(1)
        if out_idx.numel():
            in_idx = lookup[pos[out_idx]]
            found[flat] = (out_idx, in_idx)
            found[len(offsets) - 1 - flat] = (in_idx, out_idx)  # the mirrored offset: the same pairs swapped
    blocks, start = [], 0
    for flat in sorted(found):
        n = found[flat][0].numel()
        blocks.append((flat, start, start + n))
        start += n
    empty = torch.zeros(0, dtype=torch.long, device=key.device)
    out_all = torch.cat([found[f][0] for f in sorted(found)]) if found else empty
    in_all = torch.cat([found[f][1] for f in sorted(found)]) if found else empty
    return NeighbourMap(kernel_size, m, site, out_all, in_all, blocks)


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
    """Gather-matmul-scatter over kernel offsets; backward re-gathers instead of saving gathered rows."""

    @staticmethod
    def forward(ctx, feat: Tensor, weight: Tensor, nbr: NeighbourMap) -> Tensor:  # noqa: ANN001
        cout, cin = weight.shape[0], weight.shape[-1]
        w = weight.reshape(cout, -1, cin)
        out = feat @ w[:, nbr.center].t()
        _gather_mm_scatter(out, feat, nbr, nbr.out_idx, nbr.in_idx, lambda flat: w[:, flat].t())
        ctx.save_for_backward(feat, weight)
        ctx.nbr = nbr
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None, None]:  # noqa: ANN001
        feat, weight = ctx.saved_tensors
        nbr: NeighbourMap = ctx.nbr
        cout, cin = weight.shape[0], weight.shape[-1]
        w = weight.reshape(cout, -1, cin)
        grad_out = grad_out.contiguous()
        grad_feat = grad_w = None
        if ctx.needs_input_grad[0]:  # the transposed conv: pairs swapped, weights transposed
            grad_feat = grad_out @ w[:, nbr.center]
            _gather_mm_scatter(grad_feat, grad_out, nbr, nbr.in_idx, nbr.out_idx, lambda flat: w[:, flat])
        if ctx.needs_input_grad[1]:
            grad_w = torch.zeros_like(w)
            grad_w[:, nbr.center] = grad_out.t() @ feat
            for flat, a, b in nbr.blocks:
                g = grad_out.index_select(0, nbr.out_idx[a:b])
                grad_w[:, flat] = g.t() @ feat.index_select(0, nbr.in_idx[a:b])
        return grad_feat, (grad_w.view_as(weight) if grad_w is not None else None), None


def _gather_mm_scatter(out: Tensor, src: Tensor, nbr: NeighbourMap, dst_idx: Tensor, src_idx: Tensor,
                       weight_of: Any) -> None:
    """``out[dst] += src[src_idx] @ weight_of(flat)`` over every offset block, one index_add_ per group."""
    width = out.shape[1]
    for group in nbr.groups(width):
        a0, b0 = group[0][1], group[-1][2]
        buf = out.new_empty(b0 - a0, width)
        for flat, a, b in group:
            torch.mm(src.index_select(0, src_idx[a:b]), weight_of(flat), out=buf[a - a0 : b - a0])
        out.index_add_(0, dst_idx[a0:b0], buf)


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
