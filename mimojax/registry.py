"""The one generic name registry: a config string picks an estimator, a loss, a grader, a tool.

Each entry may carry `traits`, a small frozen object declared where the entry is registered
(what an estimator needs: groups, values, a baseline rollout ...), so callers ask the registry
instead of keeping their own lists of names.
"""

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

    def __init__(self, kind: str, default_traits: Any = None):
        super().__init__()
        self.kind = kind
        self.default_traits = default_traits
        self._traits: dict[str, Any] = {}

    def register(self, name: str, *aliases: str, traits: Any = None) -> Callable[[Any], Any]:
        """Decorator registering a function under `name` and any aliases, with its traits."""

        def decorator(fn):
            for key in (name, *aliases):
                if key in self and self[key] is not fn:
                    raise ValueError(f"{self.kind} {key!r} is already registered")
                super(Registry, self).__setitem__(key, fn)
                self._traits[key] = traits if traits is not None else self.default_traits
            return fn

        return decorator

    def traits(self, name: str) -> Any:
        """The traits registered with `name` (unknown names raise like `registry[name]`)."""
        self[name]  # noqa: B018  (the near-match error for unknown names)
        return self._traits[name]

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
