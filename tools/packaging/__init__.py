"""Wheels, sdists and versions of the workspace packages.

``python -m tools.packaging build <package>``   a package's wheel and sdist into dist/ (``make wheels``)
``python -m tools.packaging versions [--check]`` each package's version; the version checks
"""
