"""Chat-template pieces for multi-turn agents, as token ids: the prompt with its tools listed,
and the ids that close a model turn and open the next one around tool observations.

Token-in/token-out: the model's own ids are never re-rendered. Only the text *between* turns is
rendered by the template and tokenized, found by rendering a probe conversation with and
without the tool messages and taking the difference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from mimojax.models.tokenizer import encode_chat, stop_token_ids

_PROBE = "\u2063PROBE\u2063"  # text no template rewrites, to find where a model turn ends

TOOLS_SYSTEM = (
    "You can call tools. To call one, reply with\n"
    '<tool_call>\n{{"name": <tool name>, "arguments": <JSON object>}}\n</tool_call>\n'
    "and wait for its result. When you are done, reply without a tool call.\n"
    "Tools:\n<tools>\n{tools}\n</tools>"
)


class ChatRenderer:
    """Renders tool-agent prompts and observation turns with a tokenizer's chat template."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        template = tokenizer.chat_template or ""
        # Templates that know tools (Qwen2.5/3) list them and wrap tool messages themselves;
        # plain ChatML ones (SmolLM2, ours) get the Hermes system text and user-side responses.
        self.native_tools = "tools" in template
        self.tool_role = "tool" if "tool" in template else "user"
        self._eot_cache: dict[tuple[int, bool], tuple[int, ...]] = {}

    def prompt_ids(self, messages: Sequence[Mapping], tools: Sequence[dict]) -> list[int]:
        """The first prompt, with `tools` (function schemas) listed to the model."""
        messages = [dict(m) for m in messages]
        if tools and self.native_tools:
            return _ids(
                self.tokenizer.apply_chat_template(
                    messages, tools=list(tools), tokenize=True, add_generation_prompt=True
                )
            )
        if tools:
            listing = TOOLS_SYSTEM.format(tools="\n".join(json.dumps(t) for t in tools))
            if messages and messages[0]["role"] == "system":
                messages[0]["content"] = messages[0]["content"] + "\n\n" + listing
            else:
                messages.insert(0, {"role": "system", "content": listing})
        return encode_chat(self.tokenizer, messages)

    def _tool_message(self, text: str) -> dict:
        if self.tool_role == "tool":
            return {"role": "tool", "content": text}
        return {"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"}

    def observation_ids(self, observations: Sequence[str], stop_text: str | None) -> list[int]:
        """Ids after a model turn: its end-of-turn text (unless the model's own stop token,
        `stop_text`, closed it), the tool responses as rendered, and the next assistant header."""
        probe = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _PROBE}]
        tool_msgs = [self._tool_message(o) for o in observations]
        base = self._render(probe, add_generation_prompt=False)
        full = self._render(probe + tool_msgs, add_generation_prompt=True)
        if not full.startswith(base):
            raise ValueError("chat template: adding tool messages rewrites earlier turns")
        after_probe = base[base.index(_PROBE) + len(_PROBE) :]
        if stop_text and after_probe.startswith(stop_text):
            after_probe = after_probe[len(stop_text) :]  # the model's stop token closed its turn
        text = after_probe + full[len(base) :]
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def turn_end_id(self) -> int:
        """The stop token that closes a model turn (what the engine samples last), e.g.
        `<|im_end|>`: the template's first token after an assistant message when it is a stop
        token, else the tokenizer's EOS."""
        probe = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _PROBE}]
        base = self._render(probe, add_generation_prompt=False)
        after = base[base.index(_PROBE) + len(_PROBE) :]
        ids = list(self.tokenizer.encode(after, add_special_tokens=False)) if after else []
        if ids and ids[0] in stop_token_ids(self.tokenizer):
            return int(ids[0])
        return int(self.tokenizer.eos_token_id)

    def tool_chat_ids(
        self, messages: Sequence[Mapping], tools: Sequence[dict]
    ) -> tuple[list[int], list[int]]:
        """(ids, mask) of a whole tool-agent chat, exactly as the tool agent builds it at RL
        time: `prompt_ids` of the turns before the first assistant turn; each assistant turn as
        its text's ids plus the turn's stop token (mask 1, what the model samples); each run of
        tool turns as `observation_ids` (mask 0). SFT on these ids teaches the tokens RL sees."""
        msgs = [dict(m) for m in messages]
        first = next((i for i, m in enumerate(msgs) if m["role"] == "assistant"), None)
        if first is None:
            raise ValueError("tool chat: no assistant turn")
        ids = self.prompt_ids(msgs[:first], tools)
        mask = [0] * len(ids)
        end = self.turn_end_id()
        stop_text = self.tokenizer.decode([end])
        i = first
        while i < len(msgs):
            m = msgs[i]
            if m["role"] == "assistant":
                turn = list(self.tokenizer.encode(m["content"], add_special_tokens=False))
                ids += turn + [end]
                mask += [1] * (len(turn) + 1)
                i += 1
                continue
            if m["role"] != "tool":
                raise ValueError(
                    f"tool chat: message {i} has role {m['role']!r}; after the first assistant "
                    "turn only assistant and tool turns can follow"
                )
            j = i
            while j < len(msgs) and msgs[j]["role"] == "tool":
                j += 1
            if j == len(msgs):
                raise ValueError("tool chat: ends with a tool turn, not an assistant answer")
            obs = self.observation_ids([str(t["content"]) for t in msgs[i:j]], stop_text)
            ids += obs
            mask += [0] * len(obs)
            i = j
        return ids, mask

    def _render(self, messages, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )


def _ids(out) -> list[int]:
    if isinstance(out, Mapping) or hasattr(out, "input_ids"):
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    return [int(i) for i in out]
