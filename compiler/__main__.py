"""`python -m compiler ...` is the `kernelscope` command."""

import sys

from compiler.cli import main

sys.exit(main())
