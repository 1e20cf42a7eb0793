"""`python -m kernelscope ...` is the `kernelscope` command (kernelscope/cli.py)."""

import sys

from kernelscope.cli import main

sys.exit(main())
