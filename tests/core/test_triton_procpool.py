"""The compile pool of processes (compiler/codegen/triton/procpool.py): spawned workers
compile a wrapper's Triton kernels into Triton's on-disk cache, so that the parent's own
compile of each is a cache hit; a worker that dies or hangs leaves its kernels to the
parent's compile and the result says so. Compiled for sm_90 (no GPU here), as the offline
reports are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelscope.compiler.codegen.triton.offline import capability
from kernelscope.compiler.codegen.triton.procpool import CompileJob, CompilePool, fresh_cache

REPO = Path(__file__).resolve().parents[2]
KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)
'''
LAUNCH = {"args": [{"dtype": "float32", "address": 0}, {"dtype": "float32", "address": 64},
                   1000], "kwargs": {"BLOCK": 128, "num_warps": 4}}
# The parent's side: the same kernel compiled in a fresh process without the interpreter,
# which says whether Triton found it in its cache.
PARENT = '''
import json, sys
from pathlib import Path
from triton import knobs
from kernelscope.compiler.codegen.triton.offline import _compile, _jit_module
hits = []
knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
_compile(_jit_module(Path(sys.argv[1])).add_one, json.loads(sys.argv[2]), 90)
print(json.dumps(hits))
'''

pytestmark = pytest.mark.skipif(capability("sm_90") is None, reason="unreachable")


def _job(tmp_path: Path, source: str, cache: str = "cache") -> CompileJob:
    wrapper = tmp_path / f"graph_{abs(hash(source)) % 10**8}.py"
    wrapper.write_text(source)
    return CompileJob(str(wrapper), "add_one", LAUNCH, 90, str(tmp_path / cache))


def _parent_hits(job: CompileJob) -> list[bool]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=job.cache_dir, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", PARENT, job.wrapper, json.dumps(job.launch)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return list(json.loads(proc.stdout))


def test_a_kernel_built_in_the_pool_is_a_cache_hit_in_the_parent(tmp_path: Path) -> None:
    job = _job(tmp_path, KERNEL)
    assert _parent_hits(_job(tmp_path, KERNEL, "alone")) == [False]  # no pool: a build
    pool = CompilePool(2)
    try:
        assert fresh_cache(job.cache_dir)
        result = pool.build([job])
    finally:
        pool.close()
    assert result["fallback"] == {} and set(result["built_ms"]) == {"add_one"}
    assert not fresh_cache(job.cache_dir)
    assert _parent_hits(job) == [True]


def test_a_worker_that_dies_falls_back_and_says_so(tmp_path: Path) -> None:
    dying = _job(tmp_path, "import os\nos._exit(3)\n" + KERNEL, "dying")
    pool = CompilePool(1)
    try:
        result = pool.build([dying])
        assert result["built_ms"] == {}
        assert "a compile worker died: built in process" in result["fallback"]["add_one"]
        # the next build starts new workers
        good = _job(tmp_path, KERNEL)
        assert set(pool.build([good])["built_ms"]) == {"add_one"}
    finally:
        pool.close()


def test_a_worker_past_the_timeout_is_killed_and_falls_back(tmp_path: Path) -> None:
    stuck = _job(tmp_path, "import time\ntime.sleep(600)\n" + KERNEL)
    pool = CompilePool(1, timeout_s=0.5)
    try:
        result = pool.build([stuck])
    finally:
        pool.close()
    assert result["built_ms"] == {}
    assert "timed out" in result["fallback"]["add_one"]


def test_the_backend_prebuilds_the_offline_compile_in_the_pool_once(tmp_path: Path) -> None:
    """On a CPU host the graph's kernels are compiled for the gpu_target in the pool, into
    the cache the offline reports read; the prebuild event says what was built. A wrapper
    whose cache is already filled starts no workers."""
    import importlib.util

    import torch

    from kernelscope.compiler.codegen.backend import GeneratedKernel
    from kernelscope.compiler.codegen.triton.backend import TritonBackend
    from kernelscope.compiler.codegen.triton.offline import offline_cache_dir
    from kernelscope.compiler.options import CompileOptions

    wrapper = Path(_job(tmp_path, KERNEL).wrapper)
    spec = importlib.util.spec_from_file_location("procpool_wrapper", wrapper)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = GeneratedKernel("add_one", KERNEL, [], ["x", "y"], "",
                             {"grid": [8], "numels": [1000], "BLOCK": 128, "num_warps": 4})
    backend = TritonBackend("cpu", CompileOptions(compile_workers=2, gpu_target="sm_90"))
    dtypes = {"x": torch.float32, "y": torch.float32}
    first = backend.prebuild(module, [kernel], dtypes, 0)
    assert set(first["pool"]["built_ms"]) == {"add_one"}, first
    assert first["pool"]["fallback"] == {} and first["pool"]["processes"] == 2
    assert not fresh_cache(str(offline_cache_dir(wrapper, "sm_90")))
    assert backend.prebuild(module, [kernel], dtypes, 0) == {}  # built before: no pool
    assert backend.prebuild(module, [kernel], dtypes, 1) == {}  # one build asked: none


class _Hopper:
    """A GPU driver as the pool sees it: the current target is sm_90."""

    class active:  # noqa: N801 - triton.runtime.driver's attribute
        @staticmethod
        def get_current_target() -> object:
            return type("Target", (), {"arch": 90})()


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_the_pool_is_off_unless_asked_for_by_name(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unmeasured on a GPU and slower on 2 CPU cores: the default options start no
    workers on either host (on a GPU host the target would be the device's own)."""
    import triton.runtime

    from kernelscope.compiler.codegen.triton.backend import TritonBackend
    from kernelscope.compiler.options import CompileOptions

    monkeypatch.setattr(triton.runtime, "driver", _Hopper)
    for options in (CompileOptions(), CompileOptions(compile_workers=1)):
        assert TritonBackend(device, options)._pool_capability() is None
    asked = TritonBackend(device, CompileOptions(compile_workers=2, gpu_target="sm_90"))
    assert asked._pool_capability() == (90 if device == "cuda" else capability("sm_90"))
