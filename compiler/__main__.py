"""`python -m kernelscope.compiler ...` is the `kernelscope` command."""

import sys

from kernelscope.compiler.runtime.openmp import wait_passively

wait_passively()  # before the compiler loads torch (and OpenMP with it)

from kernelscope.compiler.cli import main  # noqa: E402

sys.exit(main())
