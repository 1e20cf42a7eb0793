"""Kernelscope's one import namespace: `kernelscope.compiler` (the compiler, a library) and
`kernelscope.server` (the explorer's web tier and job workers).

The folders stay at the checkout's top (`compiler/`, `server/`); `kernelscope/compiler` and
`kernelscope/server` are links to them. Every import, console script, entry point and worker
command names `kernelscope.*`, so a user project with its own `compiler` or `server` package
can never shadow Kernelscope's (tests/core/test_namespace.py).
"""
