"""The two test tiers, in one place: which tests the fast tier leaves out, and why.

The fast tier is README.md's command (`-m "not slow"`); CI (`.ci/run`) runs both tiers, the
whole suite without `-m`. tests/conftest.py marks every test named here `slow` while it
collects, so no module marks itself and this table is the rule. A key is a module under
tests/ ("core/test_samples.py") or one test function in it, every parametrization included
("core/test_samples.py::test_every_sample"). Each kept-out module's area keeps a faster
representative in the fast tier (tests/core/test_tiers.py checks that every folder does).
"""

from __future__ import annotations

FAST_COMMAND = 'python -m pytest -q -n auto --dist loadscope -m "not slow"'
FULL_COMMAND = "-m pytest -q -p no:cacheprovider -n auto --dist loadscope"  # .ci/run's

SLOW: dict[str, str] = {
    # Every sample or model, end to end: the fast tier keeps one case of each kind.
    "core/test_samples.py::test_sample_on_cpp_matches_eager": "every sample on C++",
    "core/test_samples.py::test_samples_through_the_triton_interpreter":
        "every sample under the Triton interpreter",
    "core/test_samples.py::test_variety_on_cpp": "every variety case on C++",
    "core/test_samples.py::test_variety_under_the_triton_interpreter":
        "every variety case under the Triton interpreter",
    "core/test_events_snapshot.py": "every sample's events on both backends",
    "core/test_backend.py::test_every_sample_through_the_named_backend":
        "every sample through torch.compile",
    "core/test_model_zoo.py::test_zoo_model_compiles_with_module_paths": "every zoo model",
    "models/test_hf_gradients.py": "Hugging Face GPT-2 and BERT, backward",
    "models/test_small_models.py": "six model stacks, inference and a training step",
    "models/test_training_suite.py": "five models, a training step each",
    "bench/test_bench_smoke.py": "every benchmark case at smoke size",
    "bench/test_train_smoke.py": "five architectures, a training step each",
    "bench/test_sweep_variants.py": "a rule sweep under the Triton interpreter",
    # The OpInfo sweeps in a subprocess: the fast tier keeps the all-dtype slice.
    "opinfo/test_opinfo_slice.py": "62 ops at three dtypes",
    "opinfo/test_grad_slice.py": "13 ops' gradients",
    # The real compiler behind the real server: the fast tier keeps the stub-served ones.
    "browser/test_e2e.py": "the browser against the real server and compiler",
    "server/test_server_e2e.py": "the server through the real compiler CLI",
}

# The areas the fast tier must still cover, each by a module it keeps (checked).
FAST_REPRESENTATIVES: dict[str, str] = {
    "compiler core": "core/test_lowering.py",
    "fusion": "core/test_fusion.py",
    "generated code, C++ and Triton": "core/test_golden.py",
    "backends": "core/test_codegen_backends.py",
    "samples, C++": "core/test_samples.py",
    "OpInfo": "opinfo/test_dtype_slice.py",
    "server": "server/test_server_api.py",
    "browser smoke": "browser/test_ui.py",
    "extension webview": "browser/test_extension_webview.py",
}
