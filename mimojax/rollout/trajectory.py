"""The unit the agent loop hands the trainer: exact token ids plus their provenance."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Trajectory:
    """One sampled response to one prompt (token-in, token-out: no re-tokenization)."""

    prompt_ids: list[int]
    response_ids: list[int]
    rollout_logprobs: list[float]  # engine's log-probs of response_ids (processed distribution)
    response_mask: list[int]  # 1 on model-written tokens, 0 on tool/observation tokens
    policy_version: int  # engine weights version when the first token was sampled
    finish_reason: str  # "stop" | "length" | "abort"
    group: int  # index of the prompt within the step's batch (GRPO group id)
    sample: int  # index of this sample among the prompt's n
    example: dict  # the data row (ground_truth, env, extra, source)
    response_text: str = ""

    def grader_item(self) -> dict:
        """What a grader sees of this trajectory (the reward pool's item)."""
        return {
            "env": self.example["env"],
            "response": self.response_text,
            "ground_truth": self.example["ground_truth"],
            "extra": self.example.get("extra", {}),
        }
