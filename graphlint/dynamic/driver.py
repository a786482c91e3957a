"""Entry point of the --confirm child process: ``python driver.py``.

Standalone on purpose: the child interpreter (``--python``) needs only torch,
never graphlint. We load the ``child`` package under a private name, so
that nothing the user's code imports can collide with it, and take our own
directory off ``sys.path`` before any user code runs.
"""

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "_graphlint_confirm_child"


def _load_child():
    location = os.path.join(HERE, "child")
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(location, "__init__.py"), submodule_search_locations=[location]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return importlib.import_module(PACKAGE + ".zygote")


if __name__ == "__main__":
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != HERE]
    sys.path.insert(0, "")
    _load_child().main()
