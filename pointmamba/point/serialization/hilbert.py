"""The 3D Hilbert curve as a table-driven state machine over 3-bit octant digits.

Construction (built at import, then verified): Hamilton's formulation of the n-D Hilbert curve
("Compact Hilbert Indices", 2006). A state is (e, d): the entry corner ``e`` and the axis ``d`` along
which the sub-curve leaves that corner. In state (e, d) the octant ``l`` of the next level (bit 2 = x,
bit 1 = y, bit 0 = z) becomes the digit ``w = gray_inverse(rotr(l ^ e, d + 1))`` and the child state is
``(e ^ rotl(entry(w), d + 1), d + direction(w) + 1 mod 3)``. The 12 states reachable from (0, 0) give
``STATE_TABLE[state, octant] = (digit, next_state)`` and its inverse ``INVERSE_TABLE[state, digit] =
(octant, next_state)``.

Depth consistency: from every state on the root cycle, octant 0 maps to digit 0 and a state on the same
cycle (period ``PERIOD`` = 3). Choosing the root state for depth D as ``CYCLE[-D mod PERIOD]`` makes the
depth-(D+1) curve restricted to [0, 2^D)^3 the depth-D curve itself, code for code. So a point's Hilbert
code does not depend on the depth (as for z-order): a scan is ordered the same alone or in a batch with
a larger extent, and the encoder may process extra leading levels for free.

Speed: the per-level tables are composed into ``LEVELS_PER_STEP``-level tables (12 x 8^k entries), so a
depth-16 code takes ceil(16 / k) vectorized gathers over all points instead of 16 bit loops per axis.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ._bits import demorton3

DIMS = 3
LEVELS_PER_STEP = 4  # levels resolved by one gather; 12 * 8^4 entries = 384 KiB of int64


# ---------------------------------------------------------------------------------------------- construction
def _gray(i: int) -> int:
    return i ^ (i >> 1)


def _gray_inverse(g: int) -> int:
    i, shift = g, 1
    while g >> shift:
        i ^= g >> shift
        shift += 1
    return i


def _trailing_ones(i: int) -> int:
    n = 0
    while i & 1:
        i >>= 1
        n += 1
    return n


def _rotr(b: int, r: int) -> int:
    r %= DIMS
    return ((b >> r) | (b << (DIMS - r))) & ((1 << DIMS) - 1)


def _rotl(b: int, r: int) -> int:
    return _rotr(b, DIMS - r % DIMS)


def _entry(w: int) -> int:
    """Entry corner of the w-th sub-cube in the standard orientation."""
    return 0 if w == 0 else _gray(2 * ((w - 1) // 2))


def _direction(w: int) -> int:
    """Axis along which the w-th sub-cube's curve leaves its entry corner (standard orientation)."""
    if w == 0:
        return 0
    return (_trailing_ones(w - 1) if w % 2 == 0 else _trailing_ones(w)) % DIMS


def _step(state: tuple[int, int], octant: int) -> tuple[int, tuple[int, int]]:
    e, d = state
    w = _gray_inverse(_rotr(octant ^ e, d + 1))
    return w, (e ^ _rotl(_entry(w), d + 1), (d + _direction(w) + 1) % DIMS)


def _build_tables() -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Enumerate the states reachable from (0, 0) (breadth first, so (0, 0) is state 0)."""
    states: list[tuple[int, int]] = [(0, 0)]
    index = {(0, 0): 0}
    rows: list[list[tuple[int, int]]] = []
    k = 0
    while k < len(states):
        row = []
        for octant in range(1 << DIMS):
            w, nxt = _step(states[k], octant)
            if nxt not in index:
                index[nxt] = len(states)
                states.append(nxt)
            row.append((w, index[nxt]))
        rows.append(row)
        k += 1
    table = np.array(rows, dtype=np.int64)  # (S, 8, 2): [state, octant] -> (digit, next)
    inverse = np.empty_like(table)  # [state, digit] -> (octant, next)
    for s in range(len(states)):
        for octant in range(1 << DIMS):
            w, nxt = table[s, octant]
            inverse[s, w] = (octant, nxt)
    return table, inverse, states


STATE_TABLE, INVERSE_TABLE, STATES = _build_tables()
NUM_STATES = len(STATES)


def _root_cycle() -> list[int]:
    """States visited from state 0 by always taking octant 0 (the first-octant transform)."""
    cycle = [0]
    while True:
        nxt = int(STATE_TABLE[cycle[-1], 0, 1])
        if nxt == cycle[0]:
            return cycle
        if nxt in cycle:
            raise AssertionError("hilbert: first-octant transform is not a pure cycle through state 0")
        cycle.append(nxt)


CYCLE = _root_cycle()
PERIOD = len(CYCLE)


def root_state(depth: int) -> int:
    """Start state for a depth-``depth`` curve, chosen so that codes do not depend on the depth."""
    return CYCLE[(-depth) % PERIOD]


def _walk(codes: np.ndarray, state: int, levels: int) -> np.ndarray:
    """Decode Hilbert codes with the per-level inverse table (reference path, numpy): (M, 3) coords."""
    m = np.zeros_like(codes)
    s = np.full_like(codes, state)
    for level in range(levels - 1, -1, -1):
        digit = (codes >> (3 * level)) & 7
        octant, s = INVERSE_TABLE[s, digit, 0], INVERSE_TABLE[s, digit, 1]
        m = (m << 3) | octant
    xyz = np.zeros((len(codes), 3), dtype=np.int64)
    for level in range(levels):
        for axis in range(3):
            xyz[:, axis] |= ((m >> (3 * level + 2 - axis)) & 1) << level
    return xyz


def _verify() -> None:
    """Bijective rows, a continuous curve from every state, and the depth-consistent root cycle."""
    if NUM_STATES != 12:
        raise AssertionError(f"hilbert: expected 12 states for the 3D curve, got {NUM_STATES}")
    for s in range(NUM_STATES):
        if sorted(STATE_TABLE[s, :, 0].tolist()) != list(range(8)):
            raise AssertionError(f"hilbert: state {s} does not map octants one-to-one onto digits")
        xyz = _walk(np.arange(8**3, dtype=np.int64), s, 3)
        if not (np.abs(np.diff(xyz, axis=0)).sum(1) == 1).all():
            raise AssertionError(f"hilbert: depth-3 curve from state {s} has a non-unit step")
        if len({tuple(p) for p in xyz.tolist()}) != 8**3:
            raise AssertionError(f"hilbert: depth-3 curve from state {s} is not a bijection")
    for s in CYCLE:
        if STATE_TABLE[s, 0, 0] != 0:
            raise AssertionError(f"hilbert: root-cycle state {s} does not map octant 0 to digit 0")


_verify()


def _compose(levels: int) -> tuple[np.ndarray, np.ndarray]:
    """``levels``-level tables, flat over ``state * 8^levels + chunk``; each entry packs
    ``(next_state * 8^levels) << (3 * levels) | output_chunk`` so one gather gives both."""
    width = 1 << (DIMS * levels)
    chunk = np.tile(np.arange(width, dtype=np.int64), NUM_STATES)
    start = np.repeat(np.arange(NUM_STATES, dtype=np.int64), width)
    packed = []
    for table in (STATE_TABLE, INVERSE_TABLE):
        s, out = start.copy(), np.zeros_like(chunk)
        for level in range(levels - 1, -1, -1):
            symbol = (chunk >> (DIMS * level)) & 7
            out = (out << DIMS) | table[s, symbol, 0]
            s = table[s, symbol, 1]
        packed.append(((s * width) << (DIMS * levels)) | out)
    return packed[0], packed[1]


_ENCODE_NP, _DECODE_NP = _compose(LEVELS_PER_STEP)
_device_tables: dict[torch.device, tuple[Tensor, Tensor]] = {}


def _tables(device: torch.device) -> tuple[Tensor, Tensor]:
    if device not in _device_tables:
        _device_tables[device] = (
            torch.from_numpy(_ENCODE_NP).to(device),
            torch.from_numpy(_DECODE_NP).to(device),
        )
    return _device_tables[device]


def _run(table: Tensor, digits: Tensor, depth: int) -> Tensor:
    """Walk the composed table over the 3-bit digits of ``digits`` (Morton or Hilbert code)."""
    k = LEVELS_PER_STEP
    bits, mask = DIMS * k, (1 << (DIMS * k)) - 1
    levels = -(-depth // k) * k  # extra leading levels are zeros and keep the code (depth consistency)
    state: Tensor | int = root_state(levels) << bits
    out = None
    for shift in range(DIMS * (levels - k), -1, -bits):
        index = digits >> shift
        index &= mask
        index += state
        value = table.index_select(0, index)
        if out is None:
            out = value & mask
        else:
            out <<= bits
            torch.bitwise_and(value, mask, out=index)
            out |= index
        value >>= bits
        state = value
    return out


def hilbert_from_morton(morton: Tensor, depth: int) -> Tensor:
    """Hilbert codes (N,) of validated grid coordinates in [0, 2^depth) given as their z-order (Morton) codes
    ``morton`` (not modified): the z-order and Hilbert orders of one batch share the bit interleaving."""
    return _run(_tables(morton.device)[0], morton, depth)


def hilbert_decode(code: Tensor, depth: int) -> Tensor:
    """Grid coordinates (N, 3) int64 of Hilbert codes (N,) int64 below 8^depth."""
    _, table = _tables(code.device)
    return torch.stack(demorton3(_run(table, code, depth)), 1)
