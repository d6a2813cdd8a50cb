"""Code world: small Python function tasks graded by hidden tests run in the sandbox.

Importing it registers the "code" grader (`mimojax.rewards.pool.get_reward_fn("code")`) and the
"code" tool env (`mimojax.rollout.tools.make_tool_env`).
"""

from mimojax.envs.code import grader, tools  # noqa: F401  (register the grader and the tools)
