"""Measured device copy bandwidth: the "100%" that memory-bound kernels are judged against.

A large device-to-device copy reads and writes every byte once, so its bytes read plus
bytes written over its median time is the most a memory-bound kernel can hope for.

    PYTHONPATH=. python benchmarks/bandwidth.py [--device cuda] [--mib 1024]
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.timing import median_ms


def copy_gbps(device: str = "cuda", mib: int = 1024) -> float:
    """GB/s (1e9 bytes per second) of dst.copy_(src) for two `mib` MiB buffers."""
    n = mib * 1024 * 1024 // 4
    src = torch.randn(n, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), device)
    return 2 * src.nbytes / (ms * 1e-3) / 1e9


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--mib", type=int, default=1024, help="size of each buffer in MiB")
    args = p.parse_args(argv)
    gbps = copy_gbps(args.device, args.mib)
    print(f"{args.device}: copy of {args.mib} MiB: {gbps:.0f} GB/s (read + write)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
