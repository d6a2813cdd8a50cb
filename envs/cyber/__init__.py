"""Cyber world: craft an input that crashes a small vulnerable program or makes it leak a flag.

Importing it registers the "cyber" grader (`mimojax.rewards.pool.get_reward_fn("cyber")`) and the
"cyber" tool env (`mimojax.rollout.tools.make_tool_env`).
"""

from mimojax.envs.cyber import grader, tools  # noqa: F401  (register the grader and the tools)
