"""Your own run: the backend's trace directory (writer.py), reading one back (reader.py), and
`kernelscope run` (own_run.py)."""
