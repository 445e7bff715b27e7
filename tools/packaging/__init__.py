"""Wheels and sdists of the workspace packages.

``python -m tools.packaging build <package>``   a package's wheel and sdist into dist/ (``make wheels``)
"""
