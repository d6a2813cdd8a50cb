"""Runs a JaxEngine under the PyPI JetStream 0.2.2 orchestrator (Driver + LLMOrchestrator).

JetStream 0.2.2 predates the Engine API that JaxEngine implements: its `prefill` returns only
a prefix and the first token of a request comes out of the first `generate` after `insert`.
`JetStreamEngine` bridges that by delaying every slot's output by one step: `insert` parks the
prefill's first token in the decode state and `generate` hands out the row parked at the
previous step. The engine runs exactly the computation of our offline driver (prefill samples
token 1, each step samples the next), so JetStream's output is the same token for token; the
price is one extra decode step per request. One-token prompts need no special case.

Install: `pip install 'mimojax[jetstream]'` then `pip install --no-deps google-jetstream==0.2.2`
(its declared deps pull seqio -> TensorFlow, which nothing here uses; see
`_install_seqio_stand_in`). Importing this module without them fails with that command.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import logging
import sys
import types
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mimojax.engine.sampling import SamplingParams
from mimojax.models.tokenizer import stop_token_ids

INSTALL_HINT = (
    "mimojax.engine.jetstream_adapter needs JetStream 0.2.2 and its light deps: "
    "pip install 'mimojax[jetstream]' && pip install --no-deps google-jetstream==0.2.2"
)


def _install_seqio_stand_in() -> None:
    """Registers a stand-in `seqio` when the real one is absent.

    jetstream.engine.token_utils imports seqio (which pulls TensorFlow) only for its
    SentencePiece vocabulary; our path tokenizes with the HF tokenizer, so the stand-in names
    are imported but never called. `Vocabulary` is subclassed by jetstream's mock vocab, so
    it must be a class; `SentencePieceVocabulary` raises if anything ever constructs it.
    """
    if "seqio" in sys.modules or importlib.util.find_spec("seqio") is not None:
        return

    class Vocabulary:
        """Stand-in base class for seqio.vocabularies.Vocabulary (never instantiated here)."""

    class SentencePieceVocabulary(Vocabulary):
        """Stand-in that refuses to load: mimojax tokenizes with HF tokenizers."""

        def __init__(self, *args, **kwargs):
            raise ImportError("seqio is not installed (mimojax's stand-in for JetStream)")

    vocabularies = types.ModuleType("seqio.vocabularies")
    vocabularies.Vocabulary = Vocabulary
    vocabularies.SentencePieceVocabulary = SentencePieceVocabulary
    seqio = types.ModuleType("seqio")
    seqio.__doc__ = "mimojax stand-in: only the names jetstream imports, never called."
    seqio.vocabularies = vocabularies
    sys.modules["seqio"] = seqio
    sys.modules["seqio.vocabularies"] = vocabularies


def _import_jetstream():
    """Imports the JetStream modules we use, undoing the orchestrator's logging side effect."""
    _install_seqio_stand_in()
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        from jetstream.core import orchestrator
        from jetstream.core.proto import jetstream_pb2
        from jetstream.engine import engine_api, token_utils, tokenizer_api, tokenizer_pb2
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} (missing: {e.name or e})") from e
    finally:
        # Importing jetstream.core.orchestrator sets the root logger to DEBUG on stdout.
        root.setLevel(level)
        root.handlers[:] = handlers
    return orchestrator, jetstream_pb2, engine_api, token_utils, tokenizer_api, tokenizer_pb2


orchestrator, jetstream_pb2, engine_api, token_utils, tokenizer_api, tokenizer_pb2 = (
    _import_jetstream()
)


def _delete_pytree(p) -> None:
    """orchestrator.delete_pytree on jax >= 0.6, where jax.tree_map no longer exists."""
    for leaf in jax.tree.leaves(p):
        if isinstance(leaf, jax.Array):
            leaf.delete()


if not hasattr(jax, "tree_map"):
    orchestrator.delete_pytree = _delete_pytree

# token_utils.pad_tokens only accepts a max_prefill_length from its own bucket list.
JETSTREAM_PREFILL_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


class HFTokenizer(tokenizer_api.Tokenizer):
    """JetStream's Tokenizer over a mimojax (transformers) tokenizer.

    Stop tokens are the model's eos ids (`mimojax_eos_token_ids`), not JetStream's default
    {eos, pad}: pad often is a real token. A BOS is added only if the HF tokenizer itself adds
    one; `bos_id` is None for models without BOS (Qwen) and is never prepended on our path.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._stop = frozenset(int(i) for i in stop_token_ids(tokenizer))

    def encode(self, s: str, **kwargs):
        """(padded ids, true length); `is_bos` means "fresh request": HF special tokens."""
        ids = self.tokenizer.encode(s, add_special_tokens=kwargs.pop("is_bos", True))
        return token_utils.pad_tokens(
            np.asarray(ids, np.int32),
            self.bos_id,
            self.pad_id,
            is_bos=False,
            prefill_lengths=kwargs.pop("prefill_lengths", None),
            max_prefill_length=kwargs.pop("max_prefill_length", None),
            jax_padding=kwargs.pop("jax_padding", True),
        )

    def decode(self, token_ids: list[int], **kwargs) -> str:
        """Text of the ids (a lone token of a split UTF-8 character decodes to U+FFFD)."""
        return self.tokenizer.decode([int(t) for t in token_ids])

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    @property
    def eos_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    @property
    def bos_id(self) -> int | None:
        return self.tokenizer.bos_token_id

    @property
    def stop_tokens(self) -> set[int]:
        return set(self._stop)


class DelayedPrefix(NamedTuple):
    """A JaxEngine prefix plus the rows [token, valid, length] of its first sampled token."""

    prefix: Any
    first_Sx3: jax.Array


class DelayedState(NamedTuple):
    """The JaxEngine decode state plus the row each slot hands out at the next generate."""

    inner: Any
    pending_Rx3: jax.Array  # R = max_concurrent_decodes * samples_per_slot


@jax.jit
def _put_rows(pending_Rx3, rows_Sx3, start):
    return jax.lax.dynamic_update_slice(pending_Rx3, rows_Sx3.astype(pending_Rx3.dtype), (start, 0))


class JetStreamEngine(engine_api.Engine):
    """A JaxEngine behind JetStream 0.2.2's Engine API (first token delayed by one step).

    `sampling` applies to every request: JetStream 0.2.2 requests carry no sampling settings.
    None means the engine's default (greedy).
    """

    def __init__(self, engine, sampling: SamplingParams | None = None):
        if engine.tokenizer is None:
            raise ValueError(
                "JetStreamEngine: the JaxEngine needs a tokenizer (JetStream detokenizes)"
            )
        self.engine = engine
        self.sampling = sampling
        fits = [b for b in JETSTREAM_PREFILL_BUCKETS if b <= engine.max_prefill_length]
        if not fits:
            raise ValueError(
                f"JetStreamEngine: max_prefill_length={engine.max_prefill_length} is below "
                f"JetStream's smallest prefill bucket ({JETSTREAM_PREFILL_BUCKETS[0]})"
            )
        self._max_prefill = fits[-1]

    def load_params(self, *args, **kwargs):
        """The wrapped engine's parameters."""
        return self.engine.load_params(*args, **kwargs)

    def prefill(self, *, params, existing_prefix=None, padded_tokens, true_length: int):
        """KV of the prompt; its first token waits in the prefix until insert."""
        prior = None if existing_prefix is None else existing_prefix.prefix
        prefix, first = self.engine.prefill(
            params=params,
            existing_prefix=prior,
            padded_tokens=padded_tokens,
            true_length=true_length,
            sampler=self.sampling,
        )
        return DelayedPrefix(prefix, first.data[: self.samples_per_slot])

    def insert(self, prefix: DelayedPrefix, decode_state: DelayedState, slot: int):
        """Inserts into `slot` and parks the first token for the next generate to emit."""
        inner = self.engine.insert(prefix.prefix, decode_state.inner, slot)
        start = jnp.int32(slot * self.samples_per_slot)
        return DelayedState(inner, _put_rows(decode_state.pending_Rx3, prefix.first_Sx3, start))

    def generate(self, params, decode_state: DelayedState):
        """One engine step; emits the rows parked at the previous step (or at insert)."""
        inner, result = self.engine.generate(params, decode_state.inner)
        emitted = engine_api.ResultTokens(
            decode_state.pending_Rx3,
            result.tokens_idx,
            result.valid_idx,
            result.length_idx,
            result.samples_per_slot,
        )
        return DelayedState(inner, result.data), emitted

    def init_decode_state(self, *args, **kwargs) -> DelayedState:
        """Empty slots; nothing parked."""
        rows = self.max_concurrent_decodes * self.samples_per_slot
        inner = self.engine.init_decode_state(*args, **kwargs)
        # Placed like the engine's results, which replace it after the first step.
        pending_Rx3 = jnp.zeros((rows, 3), jnp.int32)
        return DelayedState(
            inner, jax.device_put(pending_Rx3, self.engine.get_prefix_destination_sharding())
        )

    def get_prefix_destination_sharding(self):
        """The wrapped engine's prefix sharding."""
        return self.engine.get_prefix_destination_sharding()

    def get_tokenizer(self):
        """Placeholder metadata: build_tokenizer ignores it and wraps the engine's tokenizer."""
        return tokenizer_pb2.TokenizerParameters(path="mimojax:hf-tokenizer")

    def build_tokenizer(self, metadata=None) -> HFTokenizer:
        """The engine's HF tokenizer as a JetStream Tokenizer."""
        return HFTokenizer(self.engine.tokenizer)

    @property
    def max_concurrent_decodes(self) -> int:
        return self.engine.max_concurrent_decodes

    @property
    def samples_per_slot(self) -> int:
        return self.engine.samples_per_slot

    @property
    def max_prefill_length(self) -> int:
        """The largest JetStream prefill bucket the engine can take."""
        return self._max_prefill

    @property
    def mesh(self):
        return self.engine.mesh

    @property
    def colocated_cpus(self):
        return self.engine.colocated_cpus


class TokenInDriver(orchestrator.Driver):
    """JetStream's Driver, except that token-id prompts are used as given.

    0.2.2 prepends `bos_id` to every fresh token-id request; mimojax prompts are complete ids
    (chat template applied, BOS included where the model has one), so adding one would change
    the prompt. Text prompts still go through the tokenizer (HFTokenizer.encode).

    It also owns the event loop that `decode` runs requests on, closed only by `stop` once the
    driver's threads are gone: JetStream's detokenize thread posts a last callback to a
    request's loop after the client has already seen the end of the stream.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.jetstream_engine: JetStreamEngine = self._generate_engines[0]
        self.loop = asyncio.new_event_loop()

    def stop(self):
        """Stops JetStream's threads, then closes the request loop."""
        super().stop()
        self.loop.close()

    def _process_prefill_content(self, request, tokenizer, is_bos, max_prefill_length):
        if isinstance(request.prefill_content, str):
            return super()._process_prefill_content(request, tokenizer, is_bos, max_prefill_length)
        return token_utils.pad_tokens(
            np.asarray(request.prefill_content, np.int32),
            tokenizer.bos_id,
            tokenizer.pad_id,
            is_bos=False,
            max_prefill_length=max_prefill_length,
            jax_padding=self._jax_padding,
        )


def build_driver(engine, sampling: SamplingParams | None = None) -> TokenInDriver:
    """An in-process JetStream Driver whose prefill and generate engine is `engine` (started)."""
    adapter = JetStreamEngine(engine, sampling)
    params = adapter.load_params()
    return TokenInDriver(
        prefill_engines=[adapter],
        generate_engines=[adapter],
        prefill_params=[params],
        generate_params=[params],
        interleaved_mode=True,  # one engine for both: no prefix transfer between meshes
        jax_padding=False,
    )


@dataclasses.dataclass
class JetStreamOutput:
    """What LLMOrchestrator.Decode streamed back for one request (its first sample)."""

    token_ids: list[int]
    text: str  # empty for token-id prompts: JetStream returns ids only for those


def _check_prompt(driver: TokenInDriver, tokenizer, prompt: str | Sequence[int]) -> None:
    # Too-long prompts are silently cut by JetStream, and a raise inside its threads kills the
    # process, so bad prompts are refused here, in the caller's thread.
    n = len(tokenizer.encode(prompt) if isinstance(prompt, str) else prompt)
    limit = driver.jetstream_engine.max_prefill_length
    if not 1 <= n <= limit:
        raise ValueError(f"prompt of {n} tokens: JetStream takes 1..{limit} (max_prefill_length)")


async def decode_one(
    client, prompt: str | Sequence[int], max_tokens: int, timeout_s: float = 120.0
) -> JetStreamOutput:
    """One request through LLMOrchestrator.Decode; token ids go in as client-side tokens."""
    if isinstance(prompt, str):
        content = dict(text_content=jetstream_pb2.DecodeRequest.TextContent(text=prompt))
    else:
        ids = [int(t) for t in prompt]
        content = dict(token_content=jetstream_pb2.DecodeRequest.TokenContent(token_ids=ids))
    request = jetstream_pb2.DecodeRequest(max_tokens=max_tokens, **content)

    async def collect() -> JetStreamOutput:
        out = JetStreamOutput([], "")
        async for response in client.Decode(request):
            sample = response.stream_content.samples[0]
            out.token_ids.extend(sample.token_ids)
            out.text += sample.text
        return out

    return await asyncio.wait_for(collect(), timeout_s)


def decode(
    driver: TokenInDriver,
    prompts: Sequence[str | Sequence[int]],
    max_tokens: int,
    timeout_s: float = 120.0,
) -> list[JetStreamOutput]:
    """All prompts at once through JetStream's orchestrator, on the driver's event loop.

    From inside a running loop (a notebook cell), await `decode_one` instead, with an
    `LLMOrchestrator(driver)` client, and keep that loop open until `driver.stop()`.
    """
    tokenizer = driver.jetstream_engine.engine.tokenizer
    for p in prompts:
        _check_prompt(driver, tokenizer, p)
    client = orchestrator.LLMOrchestrator(driver=driver)

    async def run_all():
        jobs = [decode_one(client, p, max_tokens, timeout_s) for p in prompts]
        return await asyncio.gather(*jobs)

    return list(driver.loop.run_until_complete(run_all()))
