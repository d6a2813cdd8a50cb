"""General world: knowledge-work answers graded by a rubric (rules in code, the rest by a judge).

Importing it registers the "general" grader (`mimojax.rewards.pool.get_reward_fn("general")`).
"""

from mimojax.envs.general import grader  # noqa: F401  (register the grader)
