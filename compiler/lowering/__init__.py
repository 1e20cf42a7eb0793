"""Lowering: the ATen FX graph becomes IR buffers (see graph.py for the driver)."""
