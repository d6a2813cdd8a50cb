"""Music world: two-voice ABC pieces under constraints, each rule a reward dimension (music21).

Importing it registers the "music" grader (`mimojax.rewards.get_reward_fn("music")`).
"""

from mimojax.envs.music import grader  # noqa: F401  (registers the "music" reward function)
