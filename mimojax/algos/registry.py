"""Name -> function registries, so a config string picks an estimator or a loss."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any


class UnknownNameError(KeyError, ValueError):
    """An unregistered name; catchable as KeyError or ValueError."""

    def __str__(self) -> str:
        # KeyError quotes its argument; show the sentence as written.
        return str(self.args[0]) if self.args else ""


class Registry(dict):
    """A dict whose unknown-key error lists the registered names and the near matches."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def register(self, name: str, *aliases: str) -> Callable[[Any], Any]:
        """Decorator registering a function under `name` and any aliases."""

        def decorator(fn):
            for key in (name, *aliases):
                if key in self and self[key] is not fn:
                    raise ValueError(f"{self.kind} {key!r} is already registered")
                super(Registry, self).__setitem__(key, fn)
            return fn

        return decorator

    def __getitem__(self, name):
        try:
            return super().__getitem__(name)
        except KeyError:
            pass
        names = sorted(self)
        near = difflib.get_close_matches(str(name), names, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(n) for n in near)}?" if near else ""
        raise UnknownNameError(
            f"unknown {self.kind} {name!r}.{hint} Registered: {', '.join(names)}"
        ) from None


ADVANTAGE_ESTIMATORS = Registry("advantage estimator")
POLICY_LOSSES = Registry("policy loss")
KL_ESTIMATORS = Registry("KL estimator")
