"""The Triton backend: its kernel generator (kernel.py), the backend object (backend.py), the GEMM
template, its measured rules, launch path, build pool and caches, and Triton's offline stages."""
