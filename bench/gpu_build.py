#!/usr/bin/env python3
"""Build mamba-ssm's and causal-conv1d's CUDA kernels for one GPU architecture only.

Their setup.py files hard-code one ``-gencode arch=compute_XX,code=sm_XX`` pair per architecture (nine with
CUDA 13: sm_75 ... sm_121) in ``cc_flag``, and torch's extension builder adds no arch flags of its own
when the nvcc flags already name one, so ``TORCH_CUDA_ARCH_LIST`` does not narrow them. Nine
architectures of mamba-ssm's ten selective-scan kernels take far longer than one. This drops every pair
but the one asked for (each becomes ``pass``), in an unpacked source distribution:

    python bench/gpu_build.py one-arch mamba_ssm-2.3.2.post1/setup.py --arch 90
    python bench/gpu_build.py one-arch causal_conv1d-1.7.0/setup.py --arch 90

It stops with an error (and leaves the file as it was) when the file has no such pairs or not the one
asked for: then build it unpatched, for every architecture.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# cc_flag.append("-gencode") followed by cc_flag.append("arch=compute_90,code=sm_90") on the next line
_PAIR = re.compile(r'^([ \t]*)cc_flag\.append\("-gencode"\)\n[ \t]*cc_flag\.append\("arch=compute_(\w+),code=sm_(\w+)"\)\n',
                   re.MULTILINE)


def one_arch(setup_py: str, arch: str) -> str:
    """``setup_py``'s text with every gencode pair but ``arch``'s (e.g. "90") replaced by ``pass`` (so
    each ``if`` block keeps a statement); ValueError when there is none, not that one, or the result is
    not valid Python."""
    pairs = [(m.group(2), m.group(3)) for m in _PAIR.finditer(setup_py)]
    if not pairs:
        raise ValueError('no cc_flag.append("-gencode") / cc_flag.append("arch=compute_XX,code=sm_XX") pairs found')
    if (arch, arch) not in pairs:
        raise ValueError(f"sm_{arch} is not among the architectures built: {', '.join('sm_' + s for _, s in pairs)}")

    def keep(m: re.Match) -> str:
        if m.group(2) == arch and m.group(3) == arch:
            return m.group(0)
        return f"{m.group(1)}pass  # -gencode arch=compute_{m.group(2)},code=sm_{m.group(3)} dropped (bench/gpu_build.py)\n"

    out = _PAIR.sub(keep, setup_py)
    try:
        compile(out, "setup.py", "exec")
    except SyntaxError as exc:
        raise ValueError(f"the patched file does not compile ({exc})") from None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("one-arch", help="keep one architecture's gencode pair in a setup.py")
    p.add_argument("setup_py", type=Path)
    p.add_argument("--arch", default="90", help="compute capability without the dot (default 90: H100, H200)")
    args = parser.parse_args(argv)
    from pointmamba.utils.atomic_file import atomic_write

    try:
        text = args.setup_py.read_text()
        patched = one_arch(text, args.arch)
    except (OSError, ValueError) as exc:
        print(f"error: {args.setup_py}: {exc}", file=sys.stderr)
        return 1
    atomic_write(args.setup_py, patched.encode())
    print(f"{args.setup_py}: kept sm_{args.arch}, dropped {len(_PAIR.findall(text)) - 1} other architectures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
