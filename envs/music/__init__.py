"""Music world: two-voice ABC pieces under constraints, each rule a reward dimension (music21).

Importing it registers the "music" grader (`mimojax.rewards.pool.get_reward_fn("music")`) and the
"music" tool env (check_piece; used when a row or config picks the tool agent).
"""

from mimojax.envs.music import grader, tools  # noqa: F401  (register the grader and the tool)
