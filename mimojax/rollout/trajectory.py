"""The unit the agent loop hands the trainer: exact token ids plus their provenance."""

from __future__ import annotations

import dataclasses

# Finish reasons of a response cut off by a token budget rather than ended by the model:
# single-turn "length"; agents' "max_tokens" (response budget) and "max_context" (window).
TRUNCATED_REASONS = frozenset({"length", "max_tokens", "max_context"})


@dataclasses.dataclass
class Trajectory:
    """One sampled response to one prompt (token-in, token-out: no re-tokenization)."""

    prompt_ids: list[int]
    response_ids: list[int]
    rollout_logprobs: list[float]  # engine's log-probs of response_ids (processed distribution)
    response_mask: list[int]  # 1 on model-written tokens, 0 on tool/observation tokens
    policy_version: int  # engine weights version of the oldest model token (the first one)
    # "stop" | "length" | "abort"; agents also "max_turns" | "max_tool_calls" | "max_tokens" |
    # "max_context" | "timeout"
    finish_reason: str
    group: int  # index of the prompt within the step's batch (GRPO group id)
    sample: int  # index of this sample among the prompt's n
    example: dict  # the data row (ground_truth, env, extra, source)
    response_text: str = ""  # the final model turn's text (what a single-answer grader reads)
    # Multi-turn agents (empty for single-turn): where each model turn ends in response_ids,
    # the weights version of each turn, the turns' texts, the files the tools left behind.
    turn_ends: list[int] = dataclasses.field(default_factory=list)
    turn_versions: list[int] = dataclasses.field(default_factory=list)
    turn_texts: list[str] = dataclasses.field(default_factory=list)
    artifacts: dict = dataclasses.field(default_factory=dict)
    agent: str = "single_turn"
    # Counters and seconds of the agent loop (tool calls, errors, prefill tokens, timings).
    stats: dict = dataclasses.field(default_factory=dict)
    # Weights version of each response token (partial rollouts: a trajectory in flight when new
    # weights arrive continues under them). Observation tokens carry the preceding model
    # token's. Empty: every token is `policy_version`'s.
    token_versions: list[int] = dataclasses.field(default_factory=list)

    @classmethod
    def from_completion(cls, c, example: dict, group: int, sample: int, tokenizer) -> Trajectory:
        """A single-turn trajectory from an engine Completion `c` of `example["prompt_ids"]`.
        `stats["wall_s"]` is submit -> finished (queue/group_wait_s: how long a group waits
        for its slowest member)."""
        prompt = list(example["prompt_ids"])
        return cls(
            prompt_ids=prompt[len(prompt) - c.prompt_length :],
            response_ids=list(c.token_ids),
            rollout_logprobs=list(c.logprobs),
            response_mask=[1] * len(c.token_ids),
            policy_version=min(c.token_versions, default=c.policy_version),
            finish_reason=c.finish_reason,
            group=group,
            sample=sample,
            example=example,
            response_text=tokenizer.decode(c.token_ids, skip_special_tokens=True),
            stats={"wall_s": float(c.latency_s)},
            token_versions=list(c.token_versions),
        )

    @property
    def truncated(self) -> bool:
        """Cut off by a token budget (`TRUNCATED_REASONS`), not ended by the model."""
        return self.finish_reason in TRUNCATED_REASONS

    def versions(self) -> list[int]:
        """Per response token, the weights version that sampled it (or preceded it)."""
        if len(self.token_versions) == len(self.response_ids):
            return list(self.token_versions)
        return [self.policy_version] * len(self.response_ids)

    def grader_item(self) -> dict:
        """What a grader sees of this trajectory (the reward pool's item)."""
        return {
            "env": self.example["env"],
            "response": self.response_text,
            "ground_truth": self.example["ground_truth"],
            "extra": self._grader_extra(),
        }

    def _grader_extra(self) -> dict:
        extra = dict(self.example.get("extra", {}))
        if self.turn_texts:  # multi-turn: graders may read every turn and the tools' files
            extra.update(turns=list(self.turn_texts), artifacts=dict(self.artifacts))
        return extra
