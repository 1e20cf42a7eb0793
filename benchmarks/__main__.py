"""`python -m benchmarks`: the benchmark runner (benchmarks/run.py says what it does)."""

from __future__ import annotations

from benchmarks.run import main

raise SystemExit(main())
