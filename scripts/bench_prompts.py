"""Realistic chat prompts for the generation benchmark (SmolLM2's chat template)."""

from __future__ import annotations

from mimojax.models.tokenizer import encode_chat

PROMPT_TOKENS = (30, 60)  # chat-templated prompt lengths, inclusive

# Short user turns; SmolLM2's template adds a ~30-token system prompt, so these land in
# PROMPT_TOKENS. Tasks x topics gives enough distinct prompts for the largest batch.
_TASKS = (
    "Explain {} to a high-school student in two sentences.",
    "What are the three most common misconceptions about {}?",
    "Write a short haiku about {}.",
    "Give me one surprising fact about {} and say why it matters.",
    "How would you teach {} to a ten-year-old who loves football?",
    "Summarise the history of {} in one paragraph.",
    "List two pros and two cons of {}.",
    "Compose a friendly tweet announcing a new book on {}.",
)
_TOPICS = (
    "photosynthesis",
    "the French Revolution",
    "black holes",
    "compound interest",
    "machine learning",
    "the water cycle",
    "plate tectonics",
    "vaccines",
    "the Roman Empire",
    "quantum computing",
    "climate change",
    "the stock market",
)


def chat_prompts(tok, count: int) -> list[list[int]]:
    """`count` distinct chat-templated prompts, each PROMPT_TOKENS long."""
    lo, hi = PROMPT_TOKENS
    out = []
    pairs = len(_TASKS) * len(_TOPICS)
    for i in range(pairs):
        # A stride coprime with `pairs` visits every (task, topic) once, mixed from the start.
        j = i * 5 % pairs
        task, topic = _TASKS[j % len(_TASKS)], _TOPICS[j // len(_TASKS)]
        ids = encode_chat(tok, [{"role": "user", "content": task.format(topic)}])
        if lo <= len(ids) <= hi:
            out.append(ids)
        if len(out) == count:
            return out
    raise SystemExit(
        f"only {len(out)} prompts of {lo}-{hi} tokens; the largest batch needs {count}"
    )
