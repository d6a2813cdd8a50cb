"""`ConfigError`, on its own so that both config/loader.py and config/validate.py import it."""

from __future__ import annotations


class ConfigError(ValueError, KeyError):
    """A config problem; the message names the offending key(s)."""

    def __str__(self) -> str:
        # KeyError would repr() the message, which mangles multi-line errors.
        return str(self.args[0]) if self.args else ""
