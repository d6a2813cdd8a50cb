"""Visual world: HTML/CSS pages rendered in headless chromium, scored by SSIM and DOM checks.

Importing it registers the "visual" grader (`mimojax.rewards.pool.get_reward_fn("visual")`).
"""

from mimojax.envs.visual import grader  # noqa: F401  (registers the "visual" reward function)
