"""Bidirectional Mamba mixer over a packed, serialized batch of point sequences.

Rows of ``x`` (N, C) are already in curve order and grouped by sample (``lengths`` rows each). The forward
direction runs a causal Mamba over each sample; the backward direction runs one over each sample's
reversed rows and reverses its output back. Samples are padded on the right into (B, Lmax, C), so no
state, conv window or reversal ever crosses a sample boundary.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .mamba import Mamba
from pointmamba.point.sequence import Routes, from_padded, pack_to_padded, padded_to_pack, reverse_index, routes, to_padded

COMBINES = ("sum", "concat")


class BiMamba(nn.Module):
    """(N, C) packed rows + lengths (B,) -> (N, C).

    combine="sum": forward + backward; "concat": Linear(2C -> C) of [forward, backward].
    share_params=True runs one Mamba in both directions (its state_dict has no ``mamba_bwd`` entries).
    """

    def __init__(self, d_model: int, d_state: int = 16, d_conv: int = 4, expand: float = 2,
                 combine: str = "sum", share_params: bool = False) -> None:
        super().__init__()
        if combine not in COMBINES:
            raise ValueError(f"BiMamba: combine must be one of {COMBINES}, got {combine!r}")
        self.d_model = d_model
        self.combine = combine
        self.share_params = share_params
        self.mamba_fwd = Mamba(d_model, d_state=d_state, d_conv=d_conv, expand=expand)
        self.mamba_bwd = None if share_params else Mamba(d_model, d_state=d_state, d_conv=d_conv, expand=expand)
        self.proj = nn.Linear(2 * d_model, d_model) if combine == "concat" else None

    def _backward_mamba(self) -> Mamba:
        return self.mamba_fwd if self.mamba_bwd is None else self.mamba_bwd

    def _check(self, x: Tensor, lengths: Tensor) -> None:
        if x.dim() != 2 or x.shape[1] != self.d_model:
            raise ValueError(f"BiMamba: x must be (N, C={self.d_model}), got {tuple(x.shape)}")
        if lengths.dim() != 1:
            raise ValueError(f"BiMamba: lengths must be (B,), got {tuple(lengths.shape)}")
        if lengths.numel() and int(lengths.min()) < 0:
            raise ValueError("BiMamba: lengths must be >= 0")
        if int(lengths.sum()) != x.shape[0]:
            raise ValueError(f"BiMamba: lengths sum to {int(lengths.sum())} but x has {x.shape[0]} rows")

    @staticmethod
    def _run(mamba: Mamba, x: Tensor, lengths: Tensor) -> Tensor:
        padded, mask = pack_to_padded(x, lengths)
        return padded_to_pack(mamba(padded, lengths), mask)

    def forward_direction(self, x: Tensor, lengths: Tensor) -> Tensor:
        """Causal pass over every sample in curve order: (N, C)."""
        self._check(x, lengths)
        return self._run(self.mamba_fwd, x, lengths)

    def backward_direction(self, x: Tensor, lengths: Tensor) -> Tensor:
        """Causal pass over every sample in reversed curve order, returned in curve order: (N, C)."""
        self._check(x, lengths)
        rev = reverse_index(lengths)  # an involution: it also restores the order
        return self._run(self._backward_mamba(), x[rev], lengths)[rev]

    def _mix(self, x: Tensor, r: Routes) -> tuple[Tensor, Tensor]:
        """Both directions' outputs (N, C) in x's row order, the sequences given by ``r``.

        Rows go to the padded layout and back by gathers alone (``sequence.routes``). Padded positions
        sit after every sample's rows, so a causal Mamba's valid outputs never see them; their outputs
        are dropped, hence no ``lengths`` masking inside the Mamba."""
        if self.mamba_bwd is not None:
            y_fwd = from_padded(self.mamba_fwd(to_padded(x, r, 0)), r, 0)
            return y_fwd, from_padded(self.mamba_bwd(to_padded(x, r, 1)), r, 1)
        # Shared weights: one Mamba call over the 2B sequences (forward samples, then reversed samples).
        both = self.mamba_fwd(torch.cat([to_padded(x, r, 0), to_padded(x, r, 1)]))
        return from_padded(both[:r.batch], r, 0), from_padded(both[r.batch:], r, 1)

    def _combine(self, y_fwd: Tensor, y_bwd: Tensor) -> Tensor:
        if self.proj is None:
            return y_fwd + y_bwd
        return self.proj(torch.cat([y_fwd, y_bwd], dim=-1))

    def directions(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Both directions' outputs (N, C) each, before they are combined."""
        self._check(x, lengths)
        return self._mix(x, routes(torch.arange(x.shape[0], device=x.device), lengths.to(x.device)))

    def mix_rows(self, x: Tensor, r: Routes) -> Tensor:
        """(N, C) rows in row order -> (N, C) in row order, along the curve ``r`` routes (see
        :func:`pointmamba.point.sequence.routes`): what :class:`MambaBlock` calls, with no reordering copies."""
        return self._combine(*self._mix(x, r))

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        return self._combine(*self.directions(x, lengths))
