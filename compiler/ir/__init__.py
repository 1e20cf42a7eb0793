"""IR: layouts, buffers, Pointwise/Reduction loop bodies, ops handlers, sympy indexing."""
