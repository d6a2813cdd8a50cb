"""JaxEngine: our generation engine behind JetStream's Engine API (final upstream shape).

prefill (one prompt -> its KV and the first sampled token of each of its samples), insert /
bulk_insert (prefix -> decode slots), generate (one token for every slot), free_resource. Each
is jitted once per shape: prompts are padded to power-of-two buckets, so prefill compiles once
per bucket and insert once per bucket; generate compiles once per decode width, with the decode
state donated (the kernels: slot_ops.py). Beyond JetStream: `prefill_batch` / `insert_batch`
prefill many prompts in one call (batch_prefill.py), and `generate(..., max_length=n)` attends
over only the first `decode_width(n)` cache positions instead of all of max_cache_length.
Parameters are an argument of every jitted function, never a closed-over constant, so
`update_params` swaps weights without recompiling.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from mimojax.engine.api import (
    DecodeState,
    EngineError,
    Prefix,
    ResultTokens,
    bucket_length,
)
from mimojax.engine.batch_prefill import insert_rows, prefill_rows, row_prefix
from mimojax.engine.engine_batch import BatchPrefillMixin
from mimojax.engine.forward import (
    LayerCaches,
    engine_params,
    init_layer_caches,
)
from mimojax.engine.sampling import SamplingParams, sample_key
from mimojax.engine.slot_ops import (
    decode_widths,
    extract_slot,
    generate_step,
    insert_slot,
    prefill_one,
)
from mimojax.models.tokenizer import stop_token_ids


class JaxEngine(BatchPrefillMixin):
    """Generation engine over a mimojax Decoder, with JetStream's Engine API.

    `max_cache_length` bounds prompt + generated tokens per slot; `max_prefill_length` bounds
    one prefill call. The engine keeps its own copy of the parameters (`load_params`) and a
    `policy_version` that `update_params` bumps; drivers stamp it on every completion.
    """

    def __init__(
        self,
        model,
        tokenizer=None,
        *,
        max_concurrent_decodes: int = 8,
        max_prefill_length: int = 256,
        max_cache_length: int = 512,
        mesh: jax.sharding.Mesh | None = None,
        min_prefill_bucket: int = 16,
        decode_length_buckets: Sequence[int] | None = None,
        max_prefill_batch_tokens: int = 8192,
        pipeline_decode: bool = True,
    ):
        problems = []
        if max_concurrent_decodes < 1:
            problems.append(f"max_concurrent_decodes={max_concurrent_decodes} must be >= 1")
        if max_prefill_length < 1:
            problems.append(f"max_prefill_length={max_prefill_length} must be >= 1")
        if max_cache_length < max_prefill_length + 1:
            problems.append(
                f"max_cache_length={max_cache_length} must exceed "
                f"max_prefill_length={max_prefill_length} (room for generated tokens)"
            )
        if problems:
            raise EngineError("JaxEngine: " + "; ".join(problems))
        self.config = model.config
        self.tokenizer = tokenizer
        stacked = nnx.to_pure_dict(nnx.state(model, nnx.Param))
        # What update_params must be handed: the model's names, shapes, dtypes, shardings.
        self._stacked_avals = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), stacked
        )
        # The engine's own copy in its decode layout (layers split out; see forward.py), made
        # on device; later syncs reuse the same jitted split with the same output shardings.
        # Committed inputs and fixed output shardings: the arrays every call sees look the same
        # at init and after each sync, so nothing downstream recompiles.
        stacked = jax.tree.map(lambda x: jax.device_put(x, x.sharding), stacked)
        shardings = jax.jit(engine_params).lower(stacked).compile().output_shardings
        self._split_params = jax.jit(engine_params, out_shardings=shardings)
        self._params = self._split_params(stacked)
        self._slots = max_concurrent_decodes
        self._max_prefill = max_prefill_length
        self._max_cache = max_cache_length
        self._min_bucket = min(min_prefill_bucket, max_prefill_length)
        # Default to the mesh the model's parameters already live on (a trainer's mesh).
        if mesh is None:
            first = jax.tree.leaves(stacked)[0].sharding
            mesh = first.mesh if isinstance(first, jax.sharding.NamedSharding) else None
        self._mesh = mesh
        self.policy_version = 0
        # Schedulers over this engine dispatch decode step t+1 before reading step t's tokens
        # (decode_pipeline.py); a Scheduler's own `pipeline` argument overrides it.
        self.pipeline_decode = bool(pipeline_decode)
        if tokenizer is not None:
            eos = stop_token_ids(tokenizer)
        else:
            eos = [self.config.eos_token_id] if self.config.eos_token_id is not None else []
        self.eos_token_ids: tuple[int, ...] = tuple(int(e) for e in eos)
        self._prefill_jit = jax.jit(functools.partial(prefill_one, self.config))
        # Explicit output shardings keep the decode state's layout fixed across calls, so
        # the jitted functions never see a new input sharding (no recompiles).
        state_sh = self._decode_state_shardings()
        replicated = self.get_prefix_destination_sharding()
        self._insert_jit = jax.jit(insert_slot, donate_argnames=("state",), out_shardings=state_sh)
        self._extract_jit = jax.jit(
            extract_slot, static_argnames=("width",), out_shardings=replicated
        )
        # One jit per decode width (see decode_widths): compile counts stay per shape.
        widths = decode_length_buckets or decode_widths(max_cache_length)
        self._widths = tuple(sorted({min(int(w), max_cache_length) for w in widths}))
        if self._widths[-1] != max_cache_length:
            self._widths += (max_cache_length,)
        self._generate_jits = {
            w: jax.jit(
                functools.partial(generate_step, self.config, w),
                donate_argnames=("state",),
                out_shardings=(state_sh, replicated),
            )
            for w in self._widths
        }
        self._max_batch_tokens = max(int(max_prefill_batch_tokens), max_prefill_length)
        self._prefill_batch_jit = jax.jit(functools.partial(prefill_rows, self.config))
        self._insert_batch_jit = jax.jit(
            insert_rows, donate_argnames=("state",), out_shardings=state_sh
        )
        self._row_prefix_jit = jax.jit(row_prefix, out_shardings=replicated)

    # ------------------------------------------------------------ JetStream Engine API
    def load_params(self, *args, **kwargs):
        """The engine's parameters (decode layout), to pass to prefill / generate."""
        return self._params

    def init_decode_state(self, *args, **kwargs) -> DecodeState:
        """Empty slots: a zeroed KV cache of max_concurrent_decodes x max_cache_length."""
        b = self._slots
        state = DecodeState(
            init_layer_caches(self.config, b, self._max_cache),
            jnp.zeros((b,), jnp.int32),
            jnp.zeros((b,), jnp.int32),
            jnp.zeros((b, 2), jnp.uint32),
            jnp.zeros((b,), jnp.float32),
            jnp.zeros((b,), jnp.int32),
            jnp.ones((b,), jnp.float32),
        )
        return jax.device_put(state, self._decode_state_shardings())

    def _decode_state_shardings(self) -> DecodeState:
        """Slots split over the mesh's data-parallel axes when they divide evenly."""
        replicated = self.get_prefix_destination_sharding()
        if self._mesh is None:
            return DecodeState(self._caches_of(replicated, replicated), *[replicated] * 6)
        P = jax.sharding.PartitionSpec
        axes = tuple(a for a in ("data", "fsdp") if a in self._mesh.shape)
        ways = int(np.prod([self._mesh.shape[a] for a in axes])) if axes else 1
        batch = axes if axes and self._slots % ways == 0 else None
        kv = jax.sharding.NamedSharding(self._mesh, P(batch))
        return DecodeState(self._caches_of(kv, replicated), *[replicated] * 6)

    def _caches_of(self, kv, lengths) -> LayerCaches:
        layers = (kv,) * self.config.num_layers
        return LayerCaches(layers, layers, lengths)

    def prefill(
        self,
        *,
        params,
        existing_prefix: Prefix | None = None,
        padded_tokens,
        true_length: int,
        sampler: SamplingParams | None = None,
        request_id=None,
        rng_key=None,
    ) -> tuple[Prefix, ResultTokens]:
        """KV of a prompt and its first sampled token (one sample).

        `sampler` takes JetStream's sampler slot: our SamplingParams (greedy when None).
        `rng_key` overrides the key derived from sampler.seed (drivers pass per-request keys).
        """
        return self.prefill_multisampling(
            params=params,
            existing_prefix=existing_prefix,
            padded_tokens=padded_tokens,
            true_length=true_length,
            sampler=sampler,
            num_samples=1,
            rng_keys=None if rng_key is None else [rng_key],
        )

    def prefill_multisampling(
        self,
        *,
        params,
        existing_prefix: Prefix | None = None,
        padded_tokens,
        true_length: int,
        sampler: SamplingParams | None = None,
        num_samples: int = 1,
        request_id=None,
        rng_keys: Sequence | None = None,
    ) -> tuple[Prefix, ResultTokens]:
        """One prefill, `num_samples` first tokens (a GRPO group shares its prompt's KV)."""
        sampler = sampler or SamplingParams(temperature=0.0)
        ids = np.asarray(padded_tokens, np.int32).reshape(-1)
        true_length = int(true_length)
        if not 1 <= true_length <= ids.shape[0]:
            raise EngineError(f"prefill: true_length={true_length} outside [1, {ids.shape[0]}]")
        if true_length > self._max_prefill:
            raise EngineError(
                f"prefill: prompt of {true_length} tokens exceeds "
                f"max_prefill_length={self._max_prefill}"
            )
        prior_len = 0 if existing_prefix is None else int(existing_prefix.true_length)
        prior_cap = 0 if existing_prefix is None else existing_prefix.k_L[0].shape[1]
        p = bucket_length(true_length, self._max_prefill, self._min_bucket)
        if prior_cap + p > self._max_cache >= prior_len + p:
            # The prefix's buffer is wider than needed: drop its unused tail so the padded new
            # tokens still fit behind the cached ones.
            keep = lambda xs: tuple(x[:, : self._max_cache - p] for x in xs)
            existing_prefix = existing_prefix._replace(
                k_L=keep(existing_prefix.k_L), v_L=keep(existing_prefix.v_L)
            )
            prior_cap = self._max_cache - p
        if prior_cap + p > self._max_cache or prior_len + true_length >= self._max_cache:
            raise EngineError(
                f"prefill: existing prefix ({prior_len} tokens) + prompt ({true_length}) does not "
                f"fit max_cache_length={self._max_cache}"
            )
        ids_1xP = np.zeros((1, p), np.int32)
        ids_1xP[0, :true_length] = ids[:true_length]
        if rng_keys is None:
            base = sample_key(sampler.seed)
            rng_keys = [jax.random.fold_in(base, j) for j in range(num_samples)]
        if len(rng_keys) != num_samples:
            raise EngineError(f"prefill: {len(rng_keys)} rng_keys for num_samples={num_samples}")
        return self._prefill_jit(
            params,
            jnp.asarray(ids_1xP),
            jnp.int32(true_length),
            jnp.stack([jnp.asarray(k, jnp.uint32) for k in rng_keys]),
            jnp.float32(sampler.temperature),
            jnp.int32(sampler.top_k),
            jnp.float32(sampler.top_p),
            existing_prefix,
        )

    def insert(self, prefix: Prefix, decode_state: DecodeState, slot: int, sample: int = 0):
        """Puts sample `sample` of `prefix` into `slot`; its next input is that first token."""
        self._check_slot(slot)
        if prefix.k_L[0].shape[1] > self._max_cache:
            raise EngineError(f"insert: prefix longer than max_cache_length={self._max_cache}")
        return self._insert_jit(prefix, decode_state, jnp.int32(slot), jnp.int32(sample))

    def bulk_insert(self, prefix: Prefix, decode_state: DecodeState, slots: Sequence[int]):
        """Sample j of `prefix` into slots[j] (one prefill feeding a whole group)."""
        if len(slots) > prefix.num_samples:
            raise EngineError(f"bulk_insert: {len(slots)} slots for {prefix.num_samples} samples")
        for j, slot in enumerate(slots):
            decode_state = self.insert(prefix, decode_state, slot, sample=j)
        return decode_state

    def generate(self, params, decode_state: DecodeState, sampler=None, *, max_length=None):
        """(new decode state, ResultTokens): one token for every slot. Donates decode_state.

        `max_length` (beyond JetStream): an upper bound on every live slot's cached tokens
        before this step; attention then reads only decode_width(max_length) positions.
        """
        return self._generate_jits[self.decode_width(max_length)](params, decode_state)

    def decode_width(self, max_length: int | None) -> int:
        """The smallest compiled width with room for a token at position max_length."""
        if max_length is None:
            return self._max_cache
        return next((w for w in self._widths if w > max_length), self._max_cache)

    def free_resource(self, slot: int) -> None:
        """Nothing to release: a slot is reused by overwriting it at the next insert."""
        self._check_slot(slot)

    def get_prefix_destination_sharding(self):
        """Where prefixes live: replicated over the engine's mesh (or the default device)."""
        if self._mesh is None:
            return jax.sharding.SingleDeviceSharding(jax.devices()[0])
        return jax.sharding.NamedSharding(self._mesh, jax.sharding.PartitionSpec())

    def get_tokenizer(self):
        """The engine's HF tokenizer (JetStream adapters wrap it)."""
        return self.tokenizer

    def build_tokenizer(self, metadata=None):
        """The tokenizer object to encode/decode with."""
        return self.tokenizer if metadata is None else metadata

    @property
    def max_concurrent_decodes(self) -> int:
        return self._slots

    @property
    def samples_per_slot(self) -> int:
        return 1

    @property
    def max_prefill_length(self) -> int:
        return self._max_prefill

    @property
    def max_cache_length(self) -> int:
        return self._max_cache

    @property
    def mesh(self) -> jax.sharding.Mesh:
        if self._mesh is None:
            return jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
        return self._mesh

    @property
    def colocated_cpus(self):
        return None

    @property
    def use_chunked_prefill(self) -> bool:
        return False

    @property
    def prefill_chunk_size(self) -> int:
        return self._max_prefill

    # ------------------------------------------------------------ beyond JetStream
    def update_params(self, params, version: int | None = None) -> int:
        """Swaps in new weights (an nnx.State or a model), cast and resharded to the engine's.

        Dtypes and shardings are kept, so nothing recompiles. Returns the new policy_version
        (`version`, or the old one + 1).
        """
        if isinstance(params, nnx.Module):
            params = nnx.state(params, nnx.Param)
        if isinstance(params, nnx.State):
            params = nnx.to_pure_dict(params)
        new_leaves = jax.tree_util.tree_flatten_with_path(params)[0]
        old_leaves, treedef = jax.tree_util.tree_flatten_with_path(self._stacked_avals)
        name = lambda path: jax.tree_util.keystr(path)
        new_by_name = {name(p): x for p, x in new_leaves}
        old_names = [name(p) for p, _ in old_leaves]
        missing = sorted(set(old_names) - set(new_by_name))
        extra = sorted(set(new_by_name) - set(old_names))
        if missing or extra:
            raise EngineError(
                f"update_params: parameter names differ (missing {missing[:3]}, extra {extra[:3]})"
            )
        placed = []
        for name, (_, old) in zip(old_names, old_leaves):
            new = new_by_name[name]
            if tuple(new.shape) != tuple(old.shape):
                raise EngineError(f"update_params: {name} has shape {new.shape}, want {old.shape}")
            # Keep the engine's dtype and sharding: same avals, so no jitted function recompiles.
            placed.append(jax.device_put(jnp.asarray(new, old.dtype), old.sharding))
        self._params = self._split_params(jax.tree_util.tree_unflatten(treedef, placed))
        self.policy_version = self.policy_version + 1 if version is None else int(version)
        return self.policy_version

    def release_params(self) -> None:
        """Drops the engine's weights until the next `update_params`: a colocated trainer frees
        them while its update runs (stale by then anyway), so that peak holds one copy fewer.
        Prefill and generate fail until weights come back."""
        self._params = None

    def fits_continuation(self, prior_length: int, new_length: int) -> bool:
        """Whether `new_length` tokens can be prefilled behind `prior_length` cached ones."""
        if not 1 <= new_length <= self._max_prefill:
            return False
        p = bucket_length(new_length, self._max_prefill, self._min_bucket)
        return prior_length + p <= self._max_cache and prior_length + new_length < self._max_cache

    def extract_prefix(self, decode_state: DecodeState, slot: int, true_length: int) -> Prefix:
        """The KV of slot `slot`'s first `true_length` cached tokens, as a Prefix to continue from.

        Multi-turn agents pass it back as `existing_prefix`, so a later turn prefills only its
        new tokens. The width is `true_length` rounded up to a multiple of 64 (bounded
        compiles). Call it right after the slot's sample finishes, before the slot is reused.
        The caller names the length because the slot's cache may hold more: a pipelined
        scheduler's step dispatched ahead already fed the slot one more token.
        """
        self._check_slot(slot)
        width = min(self._max_cache, max(64, -(-int(true_length) // 64) * 64))
        return self._extract_jit(decode_state, jnp.int32(slot), jnp.int32(true_length), width=width)

    def compile_counts(self) -> dict[str, int]:
        """How many times each jitted entry point has compiled (one per shape)."""
        return {
            "prefill": self._prefill_jit._cache_size(),
            "insert": self._insert_jit._cache_size(),
            # The most compiles of any one decode width (1: nothing recompiled); a new width
            # used is a new shape, counted by compiled_decode_widths instead.
            "generate": max(j._cache_size() for j in self._generate_jits.values()),
            "prefill_batch": self._prefill_batch_jit._cache_size(),
            "insert_batch": self._insert_batch_jit._cache_size(),
        }

    def compiled_decode_widths(self) -> tuple[int, ...]:
        """The decode cache widths generate has compiled so far."""
        return tuple(w for w, j in self._generate_jits.items() if j._cache_size() > 0)

    def _check_slot(self, slot: int) -> None:
        if not 0 <= int(slot) < self._slots:
            raise EngineError(f"slot {slot} outside [0, max_concurrent_decodes={self._slots})")
