"""Wheels, versions and the alone-install check of the workspace packages.

``python -m tools.packaging build <package>``   a package's wheel and sdist into dist/ (``make wheels``)
``python -m tools.packaging versions [--check]`` each package's version; the version checks
``python -m tools.packaging alone [<package>...]`` each package installed alone and smoke-tested
``python -m tools.packaging sdists``             every sdist built from dist/ with pip's build isolation
"""
