"""Triton's compiled kernels in the shared kernel cache (server/jobs/tcache.py): only what the
server's own sandbox built from a verified wrapper gets in, under that wrapper's name, and
a job reaches only the entries of the wrappers it loads (compiler/codegen/triton/cache.py).
Nothing Triton wrote in a job is ever taken."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from server_support import AppFactory, state

from kernelscope.compiler.codegen.triton.cache import graph_triton_cache
from kernelscope.server.jobs.kcache import KernelCache, content_key, job_cache
from kernelscope.server.jobs.tcache import install, wants_prebuild

# One entry of Triton 3.6's cache as the H200 run left it (names as recorded there).
HASH = "4FGT5VTDPB3PAWAM2MWDQASQJLVI6QKR6JNHXFJ6RC7TW7EBAKRQ"
KERNEL = "triton_per_fused_amax_sub_exp_sum_div_0"
SUFFIXES = ("cubin", "json", "llir", "ptx", "source", "ttgir", "ttir")


def triton_entry(root: Path, key: str = HASH, payload: bytes = b"built by the server") -> Path:
    entry = root / key
    entry.mkdir(parents=True)
    for suffix in SUFFIXES:
        (entry / f"{KERNEL}.{suffix}").write_bytes(payload + suffix.encode())
    children = {f"{KERNEL}.{s}": f"/scratch/triton/{key}/{KERNEL}.{s}" for s in SUFFIXES}
    children["elsewhere.cubin"] = "/etc/passwd"
    (entry / f"__grp__{KERNEL}.json").write_text(json.dumps({"child_paths": children}))
    return entry


def _kcache(app) -> KernelCache:  # type: ignore[no-untyped-def]
    kcache = state(app).jobs.kcache
    if kcache is None:
        pytest.skip("the kernel cache is not shared here (a worker could write it)")
    return kcache


def test_install_takes_plain_files_and_points_groups_at_their_new_place(tmp_path: Path) -> None:
    built = tmp_path / "built"
    triton_entry(built)
    os.symlink("/etc/passwd", built / HASH / "linked.cubin")
    (built / "not a key").mkdir()
    os.symlink(built / HASH, built / ("L" * 52))  # an entry that is a link
    target = tmp_path / "shared" / "triton_0123456789abcdef0123"
    target.parent.mkdir()
    assert install(built, target) == len(SUFFIXES) + 1
    assert sorted(p.name for p in target.iterdir()) == [HASH]
    files = sorted(p.name for p in (target / HASH).iterdir())
    assert files == sorted([f"__grp__{KERNEL}.json", *(f"{KERNEL}.{s}" for s in SUFFIXES)])
    group = json.loads((target / HASH / f"__grp__{KERNEL}.json").read_text())["child_paths"]
    assert group == {f"{KERNEL}.{s}": str(target / HASH / f"{KERNEL}.{s}") for s in SUFFIXES}
    assert all(Path(p).read_bytes().startswith(b"built by the server") for p in group.values())
    assert (target / HASH / f"{KERNEL}.cubin").stat().st_mode & 0o777 == 0o644
    assert install(tmp_path / "nothing", tmp_path / "shared" / "triton_x") == 0


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_jobs_own_triton_entries_never_reach_the_shared_cache(
    make_app: AppFactory, tmp_path: Path, device: str
) -> None:
    """What a job (a snippet, or a back half it subverted) leaves in its cache folder: a
    Triton cache with a planted cubin, a `triton_<key>` folder of its own, specs. After
    promotion none of it is shared (with cuda specs the server builds the wrapper itself,
    which here makes no kernel), and a later job is shown no Triton entry."""
    kcache = _kcache(make_app())
    scratch = tmp_path / "job"
    folder = job_cache(scratch)
    folder.mkdir(parents=True)
    wrapper = "import triton\n\ndef call(args):\n    return args\n"
    key = content_key(kcache.versions, wrapper, "triton")
    (folder / f"graph_{key}.py").write_text(wrapper)
    triton_entry(folder / "triton" / key, payload=b"POISONED")
    triton_entry(folder / f"triton_{key}", payload=b"POISONED")
    specs = [{"shape": [4], "stride": [1], "dtype": "float32", "device": device}]
    (folder / f"graph_{key}.inputs.json").write_text(json.dumps(specs))
    result = kcache.promote(scratch)
    assert (result.wrappers, result.triton) == (1, 0)
    shared = sorted(p.name for p in kcache.root.iterdir() if p.name != "results")
    assert shared == [f"graph_{key}.py"]
    for path in kcache.root.rglob("*"):
        assert path.is_dir() or b"POISONED" not in path.read_bytes(), path
    later = tmp_path / "later"
    assert kcache.link_into(later) == 1
    assert not any(p.name.startswith("triton") for p in job_cache(later).iterdir())


def test_a_graph_reaches_only_the_entries_built_from_its_own_wrapper(tmp_path: Path) -> None:
    shared, folder = tmp_path / "shared", tmp_path / "job"
    mine, other = "a" * 20, "b" * 20
    triton_entry(shared / f"triton_{mine}")
    triton_entry(shared / f"triton_{other}", key="Z" * 52)
    folder.mkdir()
    for key in (mine, other):  # what link_into shows the job
        os.symlink(shared / f"triton_{key}", folder / f"triton_{key}")
    wrapper = folder / f"graph_{mine}.py"
    specs = [{"shape": [8, 4], "stride": [4, 1], "dtype": "float32", "device": "cuda"}]
    before = os.environ.get("TRITON_CACHE_DIR")
    with graph_triton_cache(wrapper, specs) as local:
        assert os.environ["TRITON_CACHE_DIR"] == str(local) == str(folder / "triton" / mine)
        assert sorted(p.name for p in local.iterdir()) == [HASH]
        assert (local / HASH / f"{KERNEL}.cubin").read_bytes().startswith(b"built by")
    assert os.environ.get("TRITON_CACHE_DIR") == before
    assert json.loads((folder / f"graph_{mine}.inputs.json").read_text()) == specs
    assert wants_prebuild(json.dumps(specs)) and not wants_prebuild('[{"device": "cpu"}]')
    assert not wants_prebuild("not json")
