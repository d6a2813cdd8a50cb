"""Synthetic arithmetic task world: problem generator, fixed held-out split, sympy answer checker.

Importing it registers the "math" grader (`mimojax.rewards.pool.get_reward_fn("math")`).
"""

from mimojax.envs.math import grader  # noqa: F401  (registers the "math" reward function)
