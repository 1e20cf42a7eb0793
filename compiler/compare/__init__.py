"""Two compilers' kernels for one graph, compared by the FX nodes they cover: the matcher
(match.py) and Inductor's output code read as kernels, call sites and bytes
(inductor_code.py). Torch-free: the server, the trace reader and the job all use it."""
