"""The kernel cache shared across jobs: only verified wrappers and libraries the server
built itself get in, and a snippet cannot plant anything a later job loads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from server_support import (
    REAL_BACK,
    REAL_WORKER,
    REPO,
    AppFactory,
    add_relu_code,
    compile_events,
    first_error,
    needs_real_cli,
    state,
    wait_until,
)

from kernelscope.server.jobs.kcache import KernelCache, content_key, job_cache, versions_key


def _kcache(app) -> KernelCache:  # type: ignore[no-untyped-def]
    kcache = state(app).jobs.kcache
    if kcache is None:
        pytest.skip("the kernel cache is not shared here (a worker could write it)")
    return kcache


def test_keys_match_the_compiler() -> None:
    from kernelscope.compiler.runtime import cache

    assert versions_key() == cache.versions_key()
    text = "int f() { return 1; }\n"
    assert content_key(versions_key(), text) == cache.content_key(text)
    assert content_key(versions_key(), text, "cpp") == cache.content_key(text, "cpp")


def test_versions_come_from_the_packages_source_not_their_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the server read versions from distribution metadata, which can carry a
    local tag the package's `__version__` (what the compiler reads) lacks; then every
    wrapper a job made was rejected and nothing was shared."""
    from kernelscope.server.jobs.kcache import _version

    package = tmp_path / "tritonlike"
    package.mkdir()
    (package / "__init__.py").write_text("__version__ = '3.6.0'\n")
    meta = tmp_path / "tritonlike-3.6.0+git9844da9.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: tritonlike\n"
                                   "Version: 3.6.0+git9844da9\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib.metadata

    assert importlib.metadata.version("tritonlike") == "3.6.0+git9844da9"
    assert _version("tritonlike", "__init__.py") == "3.6.0"
    assert _version("no_such_package_here", "__init__.py") == "none"


def test_rebuild_uses_the_backend_flags() -> None:
    from kernelscope.compiler.codegen.cpp import kernel as cpp
    from kernelscope.server.jobs.kcache import compiler_flags

    assert compiler_flags(REPO) == (cpp.CXX, cpp.FLAGS)


KERNEL = 'extern "C" int kernelscope_test_answer() { return 42; }\n'


def test_promotion_takes_only_verified_entries(make_app: AppFactory, tmp_path: Path) -> None:
    kcache = _kcache(make_app())
    v = kcache.versions
    scratch = tmp_path / "job"
    folder = job_cache(scratch)
    folder.mkdir(parents=True)
    good_wrapper = "def call(args):\n    return args\n"
    good_key = content_key(v, good_wrapper, "cpp")
    (folder / f"graph_{good_key}.py").write_text(good_wrapper)
    # A genuine name with other content: what a snippet would plant for a later job.
    forged_key = content_key(v, "def call(args):\n    return [a * 0 for a in args]\n", "cpp")
    (folder / f"graph_{forged_key}.py").write_text("raise SystemExit('POISONED')\n")
    # A symlink under a valid-looking name, and a library without its source.
    linked_key = content_key(v, "anything", "cpp")
    os.symlink("/etc/passwd", folder / f"graph_{linked_key}.py")
    (folder / f"kernels_{'0' * 20}.so").write_bytes(b"POISONED")
    # A genuine source with a planted library next to it: the library is built again.
    src_key = content_key(v, KERNEL)
    (folder / f"kernels_{src_key}.cpp").write_text(KERNEL)
    (folder / f"kernels_{src_key}.so").write_bytes(b"POISONED")
    bad_src_key = content_key(v, KERNEL.replace("42", "41"))
    (folder / f"kernels_{bad_src_key}.cpp").write_text(KERNEL)  # a name that lies

    result = kcache.promote(scratch)
    shared = {p.name: p.read_bytes() for p in kcache.root.iterdir() if p.is_file()}
    assert sorted(shared) == sorted([f"graph_{good_key}.py", f"kernels_{src_key}.so"])
    assert (result.wrappers, result.libraries) == (1, 1) and result.rejected >= 2
    assert shared[f"graph_{good_key}.py"] == good_wrapper.encode()
    library = shared[f"kernels_{src_key}.so"]
    assert library.startswith(b"\x7fELF") and b"POISONED" not in library
    assert all((kcache.root / n).stat().st_mode & 0o777 == 0o644 for n in shared)
    import ctypes

    assert ctypes.CDLL(str(kcache.root / f"kernels_{src_key}.so")).kernelscope_test_answer() == 42

    # A later job sees the shared entries, as symlinks in its own cache folder.
    later = tmp_path / "later"
    assert kcache.link_into(later) == 2
    linked = job_cache(later) / f"graph_{good_key}.py"
    assert linked.is_symlink() and linked.read_text() == good_wrapper


POISONER = r'''import glob, os, subprocess, sys

code = CODE
path = os.path.join(os.environ["TMPDIR"], "victim.py")
with open(path, "w") as f:
    f.write(code)
# The compiler, run on add+relu in this job's environment, fills this job's cache with the
# genuine entries a later add+relu job will look for...
cmd = [sys.executable, "-m", "kernelscope.compiler", "compile", path, "--json", "--device", "cpu",
       "--backend", "cpp"]
subprocess.run(cmd, check=True, capture_output=True)
# ...and the snippet then replaces their content.
poisoned = 0
for p in glob.glob(os.environ["KERNELSCOPE_CACHE"] + "/*"):
    if p.endswith(".py"):
        open(p, "w").write("raise SystemExit('POISONED wrapper')\n")
        poisoned += 1
    elif p.endswith(".so"):
        open(p, "wb").write(b"POISONED library")
        poisoned += 1
raise RuntimeError(f"poisoned {poisoned}")
'''


@needs_real_cli
def test_a_snippet_cannot_poison_what_a_later_job_loads(make_app: AppFactory) -> None:
    app = make_app(
        WORKER_CMD=REAL_WORKER,
        BACK_CMD=REAL_BACK,
        JOB_TIMEOUT_S=240,
        WARM_IMPORTS=["torch", "kernelscope.compiler.pipeline"],
        MAX_JOBS=1,
    )
    kcache = _kcache(app)
    client = app.test_client()
    code = add_relu_code()
    events = compile_events(client, POISONER.replace('CODE', repr(code)))
    message = first_error(events)["message"]
    assert "poisoned" in message and "poisoned 0" not in message, message
    # The cache takes a job's entries after `done`, once the worker is dead.
    assert wait_until(lambda: state(app).jobs.stats()["running"] == 0, 60)
    for entry in kcache.root.rglob("*"):  # triton_<key>/ folders on a GPU host
        assert entry.is_dir() or b"POISONED" not in entry.read_bytes(), entry.name
    # Only the back half's cache is offered to the shared cache, and the snippet's process
    # never sees that directory: its forgeries are not even candidates.
    assert kcache.stats["rejected"] == 0, kcache.stats
    later = compile_events(client, code, device="cpu", backend="cpp")
    assert wait_until(lambda: state(app).jobs.stats()["running"] == 0, 60)
    stages = {e["stage"]: e["data"] for e in later}
    assert later[-1]["data"]["ok"] is True, later[-2]
    assert stages["run"]["ok"] is True
    for entry in kcache.root.rglob("*"):  # triton_<key>/ folders on a GPU host
        assert entry.is_dir() or b"POISONED" not in entry.read_bytes(), entry.name
    assert any(p.name.startswith("graph_") for p in kcache.root.iterdir())
