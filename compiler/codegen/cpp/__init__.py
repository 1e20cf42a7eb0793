"""The C++ backend: its kernel generator (kernel.py), op table, prelude, the column-walk and
prefetch variants of reductions, and the machine code of a built kernel."""
