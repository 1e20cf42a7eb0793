"""Scheduling: dependencies, fusion into kernels, order, and the memory plan."""
