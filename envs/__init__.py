"""Task worlds, installed as `mimojax.envs`.

Python run from the repo root also finds this folder as a top-level `envs`, a name other
packages may own; imported under that name, this file hands the name over to the next `envs`
on sys.path (or fails as if this folder were not there).
"""

if __name__ != "mimojax.envs":
    import importlib.machinery as _machinery
    import importlib.util as _util
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    _path = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != _here]
    _spec = _machinery.PathFinder.find_spec(__name__, _path)
    if _spec is None:
        raise ModuleNotFoundError(f"No module named {__name__!r}", name=__name__)
    _module = _util.module_from_spec(_spec)
    _sys.modules[__name__] = _module  # the import statement returns sys.modules[__name__]
    _spec.loader.exec_module(_module)
