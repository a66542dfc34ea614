"""The PBBQ builder's one namespace: ``pbbq.flows`` and ``pbbq.tasks`` are the repository's ``flows/`` and ``tasks/``
folders, so that installing the builder adds no top-level ``tasks`` or ``flows`` (docs/architecture.md §2).

An install maps the two folders into this package (pyproject's ``package-dir``). In a source tree the symbolic
links ``pbbq/flows`` and ``pbbq/tasks`` point at them, so Python, and any tool that walks this folder on disk
(import-linter's graph of the imports), finds the package's modules where their imports say they are.
"""
