"""The optimizer of every trained role: AdamW with its learning-rate schedule, and the state it
updates (`TrainState`). Plain settings in, optax out: the run config never reaches here.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax


class TrainState(NamedTuple):
    """One role's trainable state: pure-dict params, optax state, updates applied so far."""

    params: Any
    opt_state: Any
    step: jax.Array


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    """The optimizer and its schedule as plain values (built from `optimizer.*` by the roles)."""

    name: str = "adamw"
    lr: float = 1e-6
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01
    warmup_steps: int = 0
    schedule: str = "constant"  # after warmup: "constant" | "cosine" | "linear"
    min_lr_ratio: float = 0.0
    grad_clip: float = 1.0  # global gradient-norm clip; 0 = off


def make_schedule(opt: OptimizerSettings, total_updates: int):
    """The learning-rate schedule: linear warmup, then constant / cosine / linear decay."""
    lr, warm = float(opt.lr), int(opt.warmup_steps)
    floor = lr * float(opt.min_lr_ratio)
    decay_steps = max(int(total_updates) - warm, 1)
    if opt.schedule == "constant":
        after = optax.constant_schedule(lr)
    elif opt.schedule == "cosine":
        after = optax.cosine_decay_schedule(lr, decay_steps, alpha=floor / lr if lr else 0.0)
    else:
        after = optax.linear_schedule(lr, floor, decay_steps)
    if warm == 0:
        return after
    return optax.join_schedules([optax.linear_schedule(0.0, lr, warm), after], [warm])


def make_optimizer(opt: OptimizerSettings, total_updates: int) -> optax.GradientTransformation:
    """AdamW (with global-norm clipping when optimizer.grad_clip > 0) from an optimizer config."""
    if opt.name != "adamw":
        raise ValueError(f"optimizer.name: '{opt.name}' is not supported (only 'adamw')")
    b1, b2 = opt.betas
    adam = optax.adamw(
        make_schedule(opt, total_updates),
        b1=b1,
        b2=b2,
        eps=opt.eps,
        weight_decay=opt.weight_decay,
    )
    if opt.grad_clip > 0:
        return optax.chain(optax.clip_by_global_norm(opt.grad_clip), adam)
    return adam


def init_state(params, optimizer: optax.GradientTransformation) -> TrainState:
    """A TrainState at update 0 for pure-dict `params`."""
    return TrainState(params, optimizer.init(params), jnp.zeros((), jnp.int32))
