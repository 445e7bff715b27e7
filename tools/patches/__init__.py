"""Tooling for the upstream-style patch series in ``patches/`` (against torch 2.13.0).

Run from the repository root as ``python -m tools.patches <command>``:

- ``apply``  apply the series to a PyTorch source checkout or a copy of the wheel's files
- ``check``  the series applies exactly to the pinned torch (Python files and C++ headers
             of the installed wheel) and every patch passes the linter
- ``build``  repack the installed torch wheel with the series as ``2.13.0+pu1`` and install
             it, with the workspace packages, into ``.venv-patched`` (skipped when up to date)
- ``export`` write one pull-request description per patch to ``build/patches/pr/NNNN.md``
- ``matrix`` build when needed, run ``tests/patches`` on vanilla and patched torch, and
             print patch x {vanilla, patched}; exits non-zero on any unexpected outcome
"""
