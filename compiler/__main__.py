"""`python -m kernelscope.compiler ...` is the `kernelscope` command."""

import sys

from kernelscope.compiler.cli import main

sys.exit(main())
