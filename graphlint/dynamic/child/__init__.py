"""Code that runs inside the --confirm child process.

Everything in this package must work with only the standard library and torch
installed: the child may be another interpreter (``--python``) that has never
heard of graphlint. Modules here import each other relatively and never import
``graphlint``; driver.py loads the package under a private name.
"""
