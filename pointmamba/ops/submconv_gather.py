"""The gathered submanifold conv: each site's K^3 neighbours gathered into one row (zeros where a voxel is
empty) and one matmul, forward and backward. Backend ``gather`` of ``sparse_conv`` (``backend.py``).

Why: at training sizes a GPU step looks bound by kernel launches, not arithmetic (a 5.5x faster scan left
the recipe's step where it was; issue 45, ``docs/results/gpu/README.md``), and the rulebook conv
(``submconv.py``) costs a matmul per offset forward and two backward: about 400 dispatched ops for one
3x3x3 conv's forward and backward (600 sites, counted on the CPU), 12.9k for a recipe training step. This
one dispatches under 40 per conv whatever the neighbours (the step: 9.1k). The price is arithmetic:
K^3 / (filled neighbours) times the rulebook's multiply-adds (11x at 0.2 mm, 2.4 of 27 neighbours filled) and a gathered
(sites, K^3 * Cin) block in memory, which is why the CPU keeps the rulebook.

Backward without atomics: the neighbour relation is symmetric (site j is site i's neighbour at offset d
exactly when i is j's at -d, flat offset K^3 - 1 - o), so the input gradient is the same gather over the
same table and a matmul with the kernel's offsets reversed: no ``index_add_``, deterministic on CUDA.
Same weight layout, same site mapping and same float32 / float64 compute as the rulebook conv.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from .submconv import NeighbourMap

__all__ = ["gather_conv", "neighbour_table"]


def neighbour_table(nbr: NeighbourMap) -> Tensor:
    """(sites, K^3) long: the site feeding each site through each flat offset, ``num_sites`` where the
    voxel is empty, the site itself at the centre (the map's own table)."""
    return nbr.table


def _gathered(x: Tensor, table: Tensor) -> Tensor:
    """(sites, K^3 * C): row i holds x at table[i, 0], ..., table[i, K^3 - 1], zeros for ``num_sites``."""
    padded = torch.cat([x, x.new_zeros(1, x.shape[1])])
    return padded[table].reshape(table.shape[0], -1)


class _GatherConvFunction(torch.autograd.Function):
    """out = gathered(feat) @ W^T with W (Cout, K^3 * Cin); grad_feat = gathered(grad_out) @ W', W'
    (K^3 * Cout, Cin) the offsets reversed; grad_W = grad_out^T @ gathered(feat)."""

    @staticmethod
    def forward(ctx, feat: Tensor, weight: Tensor, table: Tensor) -> Tensor:  # noqa: ANN001
        ctx.save_for_backward(feat, weight, table)
        return _gathered(feat, table) @ weight.reshape(weight.shape[0], -1).t()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None, None]:  # noqa: ANN001
        feat, weight, table = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        cout, cin = weight.shape[0], weight.shape[-1]
        grad_feat = grad_w = None
        if ctx.needs_input_grad[0]:
            # grad_feat[j] = sum over o of grad_out[table[j, o]] @ W[:, K^3 - 1 - o, :] (the symmetry above):
            # (Cout, K^3, Cin) with the offsets reversed, as (K^3 * Cout, Cin), row (o, c) = W[c, K^3 - 1 - o, :]
            w_mirror = weight.reshape(cout, -1, cin).flip(1).transpose(0, 1).reshape(-1, cin)
            grad_feat = _gathered(grad_out, table) @ w_mirror
        if ctx.needs_input_grad[1]:
            grad_w = (grad_out.t() @ _gathered(feat, table)).reshape(weight.shape)
        return grad_feat, grad_w, None


def gather_conv(site_feat: Tensor, weight: Tensor, nbr: NeighbourMap) -> Tensor:
    """Site features (sites, Cin) -> (sites, Cout) through ``weight`` (Cout, K, K, K, Cin), no bias."""
    return _GatherConvFunction.apply(site_feat, weight, neighbour_table(nbr))
