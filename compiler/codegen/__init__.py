"""Code generation: one kernel per fused group (Triton or C++), plus a Python wrapper."""
