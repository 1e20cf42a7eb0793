"""Writes ln_gelu_8192.llir.gz and .ptx.gz: a layer norm with GELU over rows of 8192,
compiled offline for sm_90 with Triton (no GPU needed): `python make_ln_gelu.py 8192`."""

import gzip
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def k(x_ptr, w_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + pid * n + offs, mask=m, other=0.0)
    w = tl.load(w_ptr + offs, mask=m, other=0.0)
    mean = tl.sum(x, 0) / n
    d = x - mean
    var = tl.sum(d * d, 0) / n
    y = d * tl.rsqrt(var + 1e-5) * w
    y = 0.5 * y * (1 + tl.math.erf(y * 0.7071))
    tl.store(y_ptr + pid * n + offs, y, mask=m)
SIGNATURE = {"x_ptr": "*fp32", "w_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}
src = triton.compiler.ASTSource(fn=k, signature=SIGNATURE,
                                constexprs={"BLOCK": int(sys.argv[1])})
c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
for stage, ext in (("llir", "llir"), ("ptx", "ptx")):
    with open(f"ln_gelu_{sys.argv[1]}.{ext}.gz", "wb") as f:
        f.write(gzip.compress(c.asm[stage].encode(), 9))
