"""Load, override and check ml-collections configs (`configs/NAME.py[:args]`).

A config file exposes `get_config(arg=None)` returning a locked `ConfigDict`.
`load_config` runs it, then applies `KEY=VALUE` overrides, casting each value
to the type of the field it replaces. Every mistake a user can make here
(unknown key, unknown arg, uncastable value, inconsistent settings) raises
`ConfigError` with a message that names the key. The cross-key checks (`validate`,
`resolve_mesh_shape`) live in config/validate.py and are re-exported here.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ml_collections import ConfigDict, FieldReference

from mimojax.config.errors import ConfigError
from mimojax.config.validate import resolve_mesh_shape, validate

__all__ = [
    "ConfigError",
    "apply_overrides",
    "cast_value",
    "flat_keys",
    "load_config",
    "parse_config_args",
    "resolve_mesh_shape",
    "sharding_overrides",
    "split_spec",
    "validate",
]

_REPO_ROOT = Path(__file__).resolve().parents[2]
_TRUE = {"true", "t", "yes", "y", "on", "1"}
_FALSE = {"false", "f", "no", "n", "off", "0"}
_NONE = {"none", "null"}


# ---------------------------------------------------------------- key lookup


def flat_keys(cfg: ConfigDict, include_groups: bool = True, prefix: str = "") -> list[str]:
    """Dotted paths of every field in `cfg` (groups too, unless include_groups=False)."""
    keys = []
    for name, value in cfg.items():
        path = f"{prefix}{name}"
        if isinstance(value, ConfigDict):
            if include_groups:
                keys.append(path)
            keys.extend(flat_keys(value, include_groups, prefix=f"{path}."))
        else:
            keys.append(path)
    return keys


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def _near(bad: str, candidates: Sequence[str], limit: int = 4) -> list[str]:
    """Candidates close to `bad`, by full dotted path or by last path component."""
    leaf = bad.rsplit(".", 1)[-1]
    scored = []
    for cand in candidates:
        score = _ratio(bad, cand)
        leaf_score = _ratio(leaf, cand.rsplit(".", 1)[-1])
        # A matching leaf under another group (rollout.clip_ratio_low) is a strong hint.
        if leaf_score >= 0.8:
            score = max(score, leaf_score)
        scored.append((score, cand))
    scored.sort(key=lambda sc: -sc[0])
    if not scored or scored[0][0] < 0.6:
        return []
    floor = max(0.6, scored[0][0] - 0.3)
    return [cand for score, cand in scored[:limit] if score >= floor]


def _unknown_key_error(key: str, cfg: ConfigDict, parent: ConfigDict, parent_path: str):
    near = _near(key, flat_keys(cfg, include_groups=False))
    if near:
        return ConfigError(f"unknown config key '{key}'; did you mean: {', '.join(near)}?")
    where = f"under '{parent_path}'" if parent_path else "at the top level"
    valid = ", ".join(str(k) for k in parent.keys())
    return ConfigError(f"unknown config key '{key}'; valid keys {where}: {valid}")


# ---------------------------------------------------------------- value casting


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _cast_scalar(key: str, text: str, tp: type) -> Any:
    text = text.strip()
    if tp is bool:
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    elif tp is int:
        try:
            return int(text)
        except ValueError:
            pass
    elif tp is float:
        try:
            return float(text)
        except ValueError:
            pass
    elif tp is str:
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            return text[1:-1]
        return text
    raise ConfigError(f"config key '{key}' expects {_type_name(tp)}, got {text!r}")


def _cast_sequence(key: str, text: str, current: Any, tp: type) -> Any:
    stripped = text.strip()
    if stripped in ("", "()", "[]"):
        return tp()
    value = _literal(stripped)
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, str) and "," in stripped:
        items = [_literal(part.strip()) for part in stripped.split(",") if part.strip()]
    else:
        items = [value]
    elem_types = {type(v) for v in (current or ())}
    if len(elem_types) == 1:
        (elem_type,) = elem_types
        if elem_type in (bool, int, float, str):
            try:
                items = [_cast_scalar(key, str(v), elem_type) for v in items]
            except ConfigError:
                raise ConfigError(
                    f"config key '{key}' expects a {tp.__name__} of {elem_type.__name__}, "
                    f"got {text!r}"
                ) from None
    return tp(items)


def cast_value(key: str, text: str, current: Any, field_type: Any, optional: bool = False) -> Any:
    """Parse `text` as a value for the field `key`, whose present value is `current`."""
    if (optional or current is None) and text.strip().lower() in _NONE:
        return None
    if field_type in (bool, int, float, str):
        return _cast_scalar(key, text, field_type)
    if field_type in (tuple, list):
        return _cast_sequence(key, text, current, field_type)
    if field_type is type(None) or field_type is None:
        return _literal(text.strip())
    raise ConfigError(
        f"config key '{key}' holds a {_type_name(field_type)}, which cannot be set "
        "from the command line"
    )


# ---------------------------------------------------------------- overrides


def _set_one(cfg: ConfigDict, key: str, text: str) -> None:
    parts = key.split(".")
    holder, path = cfg, ""
    for part in parts[:-1]:
        if part not in holder:
            raise _unknown_key_error(key, cfg, holder, path)
        path = f"{path}.{part}" if path else part
        holder = holder[part]
        if not isinstance(holder, ConfigDict):
            raise ConfigError(
                f"unknown config key '{key}': '{path}' is a value "
                f"({_type_name(type(holder))}), not a group"
            )
    name = parts[-1]
    if name not in holder:
        raise _unknown_key_error(key, cfg, holder, path)
    current = holder[name]
    if isinstance(current, ConfigDict):
        sub = ", ".join(f"{key}.{k}" for k in current.keys())
        raise ConfigError(f"config key '{key}' is a group; set one of its fields: {sub}")
    # Placeholder fields (FieldReference) may go back to None after being set.
    raw = dict(holder.items(preserve_field_references=True))[name]
    optional = isinstance(raw, FieldReference)
    value = cast_value(key, text, current, holder.get_type(name), optional=optional)
    try:
        holder[name] = value
    except (TypeError, ValueError) as e:
        raise ConfigError(f"config key '{key}': cannot set {value!r}: {e}") from None


def apply_overrides(cfg: ConfigDict, overrides: Sequence[str]) -> ConfigDict:
    """Apply `KEY=VALUE` strings (dotted keys, as after `--config.`) to `cfg` in place."""
    for item in overrides:
        item = item.removeprefix("--config.")
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"config override {item!r} is not of the form KEY=VALUE")
        _set_one(cfg, key.strip(), text)
    return cfg


# ---------------------------------------------------------------- config args


def parse_config_args(arg: str | None, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Parse a config arg string `key=value,flag` into `defaults` updated and typed."""
    out = dict(defaults)
    for item in (arg or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, text = item.partition("=")
        key = key.strip()
        if key not in defaults:
            near = difflib.get_close_matches(key, list(defaults), n=3, cutoff=0.5)
            hint = f"; did you mean: {', '.join(near)}?" if near else ""
            valid = ", ".join(defaults) or "(none)"
            raise ConfigError(f"unknown config arg '{key}'{hint} (valid args: {valid})")
        default = defaults[key]
        if not sep:
            if not isinstance(default, bool):
                raise ConfigError(f"config arg '{key}' needs a value: {key}=...")
            out[key] = True
            continue
        field_type = type(default) if default is not None else type(None)
        try:
            out[key] = cast_value(key, text, default, field_type)
        except ConfigError as e:
            raise ConfigError(f"config arg {str(e).removeprefix('config key ')}") from None
    return out


# ---------------------------------------------------------------- loading


def split_spec(spec: str) -> tuple[str, str | None]:
    """Split `path/to/config.py:args` into (path, args or None)."""
    idx = spec.find(".py:")
    if idx >= 0:
        path, arg = spec[: idx + 3], spec[idx + 4 :]
        return path, (arg or None)
    if ":" in spec and not spec.endswith(".py"):
        path, _, arg = spec.partition(":")
        return path, (arg or None)
    return spec, None


def _resolve_path(path: str) -> Path:
    given = Path(path).expanduser()
    candidates = [given]
    if not given.is_absolute():
        candidates.append(_REPO_ROOT / given)
    if given.suffix != ".py" and len(given.parts) == 1:
        # Bare names: `grpo_tiny` means configs/grpo_tiny.py.
        candidates += [Path("configs") / f"{path}.py", _REPO_ROOT / "configs" / f"{path}.py"]
    for cand in candidates:
        if cand.is_file():
            return cand
    available = sorted(p.stem for p in (_REPO_ROOT / "configs").glob("*.py"))
    raise ConfigError(f"config file '{path}' not found (configs/: {', '.join(available)})")


def _run_get_config(path: Path, arg: str | None) -> ConfigDict:
    spec = importlib.util.spec_from_file_location(f"mimojax_config_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    get_config = getattr(module, "get_config", None)
    if get_config is None:
        raise ConfigError(f"config file '{path}' has no get_config()")
    if arg is None:
        return get_config()
    if not inspect.signature(get_config).parameters:
        raise ConfigError(f"config file '{path}' takes no args, got ':{arg}'")
    return get_config(arg)


def load_config(spec: str, overrides: Sequence[str] = ()) -> ConfigDict:
    """Load `path/to/config.py[:args]`, lock it, and apply `KEY=VALUE` overrides."""
    path_str, arg = split_spec(spec)
    path = _resolve_path(path_str)
    try:
        cfg = _run_get_config(path, arg)
    except ConfigError as e:
        raise ConfigError(f"{path_str}: {e}") from None
    if not isinstance(cfg, ConfigDict):
        raise ConfigError(f"{path_str}: get_config() returned {type(cfg).__name__}, not ConfigDict")
    cfg.lock()
    return apply_overrides(cfg, overrides)


def sharding_overrides(sharding_cfg: ConfigDict) -> dict[str, str | tuple[str, ...] | None]:
    """`sharding.overrides` as a dict for `mimojax.sharding.get_rules`, unset keys left out."""
    rules: dict[str, str | tuple[str, ...] | None] = {}
    for name, axes in sharding_cfg.overrides.items():
        if axes is None:
            continue
        parts = tuple(a.strip() for a in axes.split(",") if a.strip())
        rules[name] = None if not parts else parts[0] if len(parts) == 1 else parts
    return rules
