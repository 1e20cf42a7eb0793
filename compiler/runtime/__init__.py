"""Runtime: the compile cache, building and loading kernels, timing, reference interpreter."""
