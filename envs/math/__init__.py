"""Synthetic arithmetic task world: problem generator, fixed held-out split, sympy answer checker,
and the `calculator` tool.

Importing it registers the "math" grader (`mimojax.rewards.pool.get_reward_fn("math")`) and the
"math" tool env (`mimojax.rollout.tools.make_tool_env`).
"""

from mimojax.envs.math import (
    grader,  # noqa: F401  (registers the "math" reward function)
    tools,  # noqa: F401  (registers the "math" tool env)
)
