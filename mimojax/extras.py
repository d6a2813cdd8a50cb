"""The optional extras: which feature needs which, and the one error a missing one raises.

The core install (`pip install mimojax`) trains, evaluates and runs the math, code, cyber and
general worlds. The rest is in extras (pyproject.toml): a feature imports its packages through
`require`, so without its extra it fails with one `MissingExtraError` naming the pip command:

    fastapi = require("fastapi", "serve", "mimojax serve")
    # MissingExtraError: mimojax serve needs the [serve] extra (fastapi is not installed):
    #   pip install 'mimojax[serve]'

Stdlib only: the lowest layer, importable from anywhere (envs/ included).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from types import ModuleType

# extra -> the modules it provides (import names, not distribution names).
EXTRAS: dict[str, tuple[str, ...]] = {
    "music": ("music21",),
    "visual": ("skimage", "playwright"),
    "serve": ("fastapi", "uvicorn", "plotly"),
    "ray": ("ray",),
    "gguf": ("torch",),
}
# world (a grader name, `mimojax.envs.<name>`) -> the extra its grader needs.
WORLD_EXTRAS: dict[str, str] = {"music": "music", "visual": "visual"}


def install_command(extra: str) -> str:
    return f"pip install 'mimojax[{extra}]'"


class MissingExtraError(ImportError):
    """A feature used without its optional extra; the message names the pip command."""

    def __init__(self, message: str, extra: str | None = None):
        super().__init__(message)
        self.extra = extra

    def __reduce__(self):  # through the reward pool's worker pipes and Ray
        return type(self), (self.msg, self.extra)


def missing_message(feature: str, extra: str, modules: str | Sequence[str] = ()) -> str:
    """'FEATURE needs the [EXTRA] extra (MODULES not installed): pip install ...'."""
    names = [modules] if isinstance(modules, str) else list(modules)
    what = f" ({', '.join(names)} {'is' if len(names) == 1 else 'are'} not installed)"
    return f"{feature} needs the [{extra}] extra{what if names else ''}: {install_command(extra)}"


def require(module: str, extra: str, feature: str) -> ModuleType:
    """`importlib.import_module(module)`, or MissingExtraError when it (or its top-level
    package) is not installed. An ImportError from inside an installed package propagates."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        name = getattr(e, "name", None)
        if name is not None and (module == name or module.startswith(name + ".")):
            top = module.split(".")[0]
            raise MissingExtraError(missing_message(feature, extra, top), extra) from e
        raise


def installed(module: str) -> bool:
    """Whether the top-level `module` can be imported here (it is not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a None or half-imported entry in sys.modules
        return False


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that are not installed here (nothing is imported)."""
    return [module for module in EXTRAS[extra] if not installed(module)]


def check_extra(extra: str, feature: str) -> None:
    """Raise MissingExtraError if any module of `extra` is not installed (nothing imported)."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(missing_message(feature, extra, missing), extra)
