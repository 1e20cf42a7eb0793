"""The two test tiers, in one place: which tests the fast tier leaves out, and why.

The fast tier is README.md's command (`-m "not slow"`); CI (`.ci/run`) runs both tiers, the
whole suite without `-m`. tests/conftest.py marks every test named here `slow` while it
collects, so no module marks itself and this table is the rule. A key is a module under
tests/ ("core/test_samples.py") or one test function in it, every parametrization included
("core/test_samples.py::test_every_sample"). Each kept-out module's area keeps a faster
representative in the fast tier (tests/core/test_tiers.py checks that every folder does).

Skips are not a tier: a test skips, saying why, where this machine lacks what it needs
(`python -m pytest -rs` prints each reason). On a plain 2-core machine without the
services (2026-12-06) the fast tier skipped 111 (118 at a06e8a8, the same kinds):
- 103 are the `postgres` and `redis` cases of the modules that run every test on each job
  and store back-end (tests/server/server_support.py, BACKENDS): test_server_api (54),
  test_server_streams (24), test_server_follow_ups (14), test_server_concurrency (4),
  test_server_crash, test_server_faults, test_server_pool and test_server_trust (2 each).
  Without KERNELSCOPE_TEST_POSTGRES and KERNELSCOPE_TEST_REDIS (`eval "$(bash
  scripts/services.sh start)"`) they skip; CI sets KERNELSCOPE_REQUIRE_SERVICES=1, where a
  missing service fails instead. An `embedded_only` test skips its other back-ends even then.
- The rest need a host feature: per-job cgroups of one version or the other
  (test_server_gaps), a seccomp filter, bubblewrap's namespaces, a worker not running as
  root (test_server_sandbox's fork bomb), root and setpriv (test_server_limits), an
  isolation level the host lacks (test_server_limits), Node.js or tsc (the web UI's unit
  and type checks), objdump, or an installed package (test_backend's entry point).
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
    # Two subprocesses that compile AdamW steps (C++, Triton interpreter): about 60 s; the
    # combo grouping's schedule tests stay in the fast tier.
    "core/test_combo_kernels.py::test_compiled_adamw_step_in_combo_kernels_matches_eager":
        "AdamW steps in combo kernels, C++ and the Triton interpreter, in subprocesses",
    # A real TORCH_TRACE log made by stock torch.compile (about 40 s of Inductor builds):
    # the record reader, the graph text and the run command stay in the fast tier.
    "core/test_torch_trace.py::test_a_real_log_opens_with_breaks_recompiles_and_a_training_step":
        "a TORCH_TRACE log made by stock Inductor (C++ builds)",
    "core/test_torch_trace.py::test_an_unknown_record_of_a_real_log_is_shown_not_dropped":
        "the same log, with a record planted",
    "core/test_torch_trace.py::test_the_logs_training_graphs_rebuild_as_they_run_eagerly":
        "the fixture's log made by stock Inductor, then two graphs compiled by ours",
    "core/test_torch_trace.py::test_kernelscope_open_stores_a_log_as_a_trace":
        "the same log through kernelscope open",
    "core/test_backend.py::test_every_sample_through_the_named_backend":
        "every sample through torch.compile",
    "core/test_model_zoo.py::test_zoo_model_compiles_with_module_paths": "every zoo model",
    "models/test_hf_gradients.py": "Hugging Face GPT-2 and BERT, backward",
    "models/test_small_models.py": "six model stacks, inference and a training step",
    "models/test_training_suite.py": "five models, a training step each",
    "models/test_ddp.py": "DDP steps on two gloo processes, compiled and eager",
    "models/test_fsdp.py": "FSDP2 and DTensor steps on two gloo processes, compiled and eager",
    "browser/test_distributed_run.py":
        "two graphs recorded in subprocesses (torch imported, compiled), then the page",
    "core/test_rank_traces.py::test_run_nproc_records_each_rank_and_open_links_them":
        "kernelscope run --nproc 2 (two processes compile) and kernelscope open",
    "models/test_zoo.py::test_step_within_the_rule_no_new_fallbacks":
        "42 Hugging Face architectures, a training step each (about 30 s each)",
    "models/test_zoo_channels_last.py":
        "six vision zoo models trained channels-last (the fast tier keeps "
        "core/test_attention_training.py's pattern)",
    "bench/test_bench_smoke.py": "every benchmark case at smoke size",
    "bench/test_train_smoke.py": "five architectures, a training step each",
    "core/test_eager_formulas.py::test_cpp_follows_eager":
        "Bessel and addbmm cases, a g++ build per case, in a subprocess",
    "core/test_eager_formulas.py::test_triton_interpreted_follows_eager":
        "Bessel and addbmm cases under the Triton interpreter, in a subprocess",
    "bench/test_infer_smoke.py::test_a_zoo_model_in_bf16_is_judged_timed_and_tabled":
        "a zoo model compiled and timed in bf16 inference",
    "bench/test_infer_smoke.py::test_a_wrong_output_fails_the_rule":
        "a zoo model compiled and timed in bf16 inference",
    "bench/test_sweep_variants.py": "a rule sweep under the Triton interpreter",
    # The broad op-by-op checks against eager: the fast tier keeps core/test_native_lowerings.py.
    "core/test_correctness_semantics.py": "every semantics case on both backends",
    "core/test_structured_ops.py": "every structured op on both backends",
    # The OpInfo sweeps in a subprocess: the fast tier keeps the all-dtype slice.
    "opinfo/test_opinfo_slice.py": "62 ops at three dtypes",
    "opinfo/test_grad_slice.py": "13 ops' gradients",
    # One fresh interpreter (torch imported, a whole compile) per check, end to end: the fast
    # tier keeps each module's in-process tests (measured per file under load ~5, 2026-12-02:
    # these ten were 208 of core's 622 s).
    "core/test_index_asserts.py::test_out_of_range_index_stops_the_kernel":
        "a kernel made to fail, in a subprocess per case (the in-range cases stay)",
    "browser/test_reproducer.py":
        "a graph's reproducer script run through torch.compile in a fresh interpreter (the "
        "pane's export link stays in browser/test_profile_pane.py)",
    "core/test_bundle.py::test_snippet_output_is_data_never_events":
        "a snippet through both CLI halves (server/test_server_streams.py keeps the property)",
    "core/test_bundle.py::test_stages_command_runs_triton_kernels_in_the_interpreter":
        "the back half's CLI under the Triton interpreter, in a fresh interpreter (the "
        "in-process back-half tests stay)",
    "core/test_lse_steps.py::test_every_lse_step_matches_eager":
        "every logsumexp step under the Triton interpreter (the default step stays)",
    "core/test_backend.py::test_entry_point_works_without_importing_kernelscope":
        "a fresh interpreter through the installed entry point",
    "core/test_graph_cache.py::test_the_interpreter_path_hits_with_the_same_outputs":
        "the graph cache under the Triton interpreter, in a subprocess (the C++ hits stay)",
    "core/test_dead_kernel.py": "a training graph under the Triton interpreter, in a subprocess",
    "core/test_realize_rule.py::test_triton_inline_rule_trains_as_eager":
        "four training cases (GPT-2 and Mixtral's block) under the Triton interpreter, in a "
        "subprocess (about 90 s; the rule's lowering tests stay)",
    "core/test_triton_offline.py::test_a_cpu_host_shows_a_triton_kernels_ptx_compiled_for_sm_90":
        "a sample compiled to PTX offline through the CLI",
    "core/test_trace_dir.py::test_trace_dir_records_every_compile_with_its_call_site":
        "a user's script with the trace_dir option, in a fresh interpreter",
    "core/test_inductor_output.py::test_inductor_output_code_is_captured_with_its_kernels":
        "a TorchInductor compile, C++ build included (the cheaper Inductor checks stay)",
    "core/test_backend_names.py::"
    "test_triton_on_the_cpu_without_the_interpreter_is_refused_and_leaves_the_env_alone":
        "a fresh interpreter without TRITON_INTERPRET (the name checks stay)",
    # Hostile snippets through the real compiler CLI, each a sandbox that imports torch (93 s
    # of one worker on an idle host, 181 s once when a case ran into its wall clock), and the
    # fork bombs, whose processes share the sandbox uid's limit with every other sandbox
    # (the rest of server/test_server_limits.py stays).
    "server/test_server_sandbox.py": "hostile snippets through the real compiler CLI",
    "server/test_server_limits.py::test_a_normal_job_passes_while_another_fork_bombs":
        "a fork bomb beside a normal job",
    # The real compiler behind the real server: the fast tier keeps the stub-served ones.
    "browser/test_e2e.py": "the browser against the real server and compiler",
    "browser/test_own_run_upload.py":
        "a run recorded by the real compiler, uploaded to the real server, in the browser "
        "(core/test_own_run.py and server/test_server_uploads.py keep the upload)",
    "server/test_server_e2e.py": "the server through the real compiler CLI",
    "server/test_torch_trace_rebuild_api.py": "a logged graph compiled by the real compiler CLI",
    # The 14.2 MB GPT-2 step stored, served part by part and diffed on each store (13-18 s
    # a case on a loaded host); the job path, upload and refusal tests stay fast.
    "server/test_server_parts.py::test_a_big_trace_is_served_as_its_head_and_one_part_per_graph":
        "the GPT-2 step through SQLite and PostgreSQL, read back whole and diffed",
    "server/test_server_parts.py::test_a_job_of_a_model_sized_trace_is_stored_in_parts":
        "14.2 MB of events through a sandboxed worker's two halves, local and on RQ (20 s)",
    "server/test_server_kresults.py::test_a_repeated_job_reports_every_kernel_as_a_cache_hit":
        "two jobs through the real server and compiler (the in-process promotion tests stay)",
    "server/test_server_kcache.py::test_a_snippet_cannot_poison_what_a_later_job_loads":
        "two sandboxed jobs through the real compiler (the promotion checks stay)",
    # The web UI's views in Chromium, a page load and a trace per check (2-8 s each; 206 s of
    # the fast tier's 748 on 2 cores, 2026-12-05): browser/test_ui.py keeps the smoke of
    # every pane, test_pane_roots.py, test_js_units.py and the extension's webview stay.
    "browser/test_explorer.py": "every explorer view in Chromium",
    "browser/test_layout_fit.py": "pane sizes and layouts at two window sizes",
    "browser/test_modules.py": "the module tree of a model at two window sizes",
    "browser/test_follow_ups.py": "the follow-up jobs (Inductor, profile) in the browser",
    "browser/test_offline_stages.py": "the offline PTX/SASS stages in the browser",
    "browser/test_structural_diff.py": "the structural diff view in the browser",
    "browser/test_model_traces.py::test_a_model_trace_opens_and_every_tab_fills":
        "three model traces (GPT-2's is 14 MB) opened, every tab shown",
    "browser/test_model_traces.py::test_a_model_graph_opens_folded_by_module_and_fitted":
        "three model traces' graphs laid out, folded and opened",
    "browser/test_model_traces.py::test_the_memory_chart_fits_its_pane":
        "the 6-block training step's memory chart",
    "browser/test_extension_webview.py::test_webview_opens_a_model_trace":
        "the 6-block training step in the VS Code panel",
    # Real wall-clock waits: slow clients, SIGTERM, slot limits (32 s of sleeping).
    "server/test_server_fairness.py": "slowloris, SIGTERM and slot limits in real time",
    "server/test_server_attacks.py": "issue 30's attacks on a live server, health timed "
        "beside each (the highlight deadline stays in test_server_caps.py)",
    "server/test_server_limits.py::test_forged_events_cannot_change_stages_run_or_profile":
        "a sandboxed job through the real compiler that forges events",
    # Pools of fresh interpreters, and the Triton interpreter's batch fixtures (6-11 s each
    # to start): the C++ cases of the same modules stay.
    "core/test_lse_steps.py::test_many_rows_take_the_default_step_and_match_eager":
        "logsumexp's default step under the Triton interpreter",
    "core/test_column_reductions.py::test_triton_interpreter_matches_eager":
        "column reductions under the Triton interpreter (the C++ cases stay)",
    "core/test_train_layout.py::test_training_step_channels_last_matches_eager_triton":
        "a channels-last training step under the Triton interpreter (the C++ ones stay)",
    "core/test_own_run.py::test_all_backends_routes_other_backends_here":
        "a user's script in a fresh interpreter (the recorded run's tests stay)",
    "core/test_own_run.py::test_a_graph_specialised_to_new_sizes_keeps_its_lines":
        "a user's script in a fresh interpreter (the recorded run's tests stay)",
    "core/test_packaging.py::test_a_wheel_installs_and_serves_in_a_clean_virtualenv":
        "a wheel built, installed in a new virtualenv, served and compiling (about 60 s; the "
        "declaration and package-tree checks stay)",
}

# The areas the fast tier must still cover, each by a module it keeps (checked).
FAST_REPRESENTATIVES: dict[str, str] = {
    "compiler core": "core/test_lowering.py",
    "fusion": "core/test_fusion.py",
    "generated code, C++ and Triton": "core/test_golden.py",
    "backends": "core/test_codegen_backends.py",
    "samples, C++": "core/test_samples.py",
    "OpInfo": "opinfo/test_dtype_slice.py",
    "op-by-op against eager": "core/test_native_lowerings.py",
    "server": "server/test_server_api.py",
    "browser smoke": "browser/test_ui.py",
    "extension webview": "browser/test_extension_webview.py",
}
