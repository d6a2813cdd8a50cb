"""LoRA in the trainer (configs/grpo_tiny.py + model.lora.*): only the adapters train and sit in
the optimizer state, the reference is the base, the engine samples the merged weights, a
crash-and-resume equals an uninterrupted run, and `mimojax export` reloads in transformers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import transformers
from flax import nnx

from mimojax.cli.main import main as cli_main
from mimojax.config.loader import ConfigError, load_config, validate
from mimojax.engine import generate
from mimojax.models.loader import load_model
from mimojax.models.lora import lora_model, num_params
from mimojax.observe.metrics import read_metrics
from mimojax.rollout.batch import TrainBatch
from mimojax.train.roles import build_roles, sampling_from_config
from mimojax.train.step import Counts, sequence_logprobs
from mimojax.train.trainer import Trainer

TINY = "configs/grpo_tiny.py"
LORA = ("model.lora.rank=4", "model.lora.alpha=8.0", "optimizer.lr=1e-2")


def _cfg(*overrides):
    return load_config(TINY, [*LORA, *overrides])


def _np(tree):
    return jax.tree.map(np.asarray, jax.device_get(tree))


def _random_like(tree, seed=3, scale=0.3):
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    return treedef.unflatten([scale * jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)])


def _batch(tokenizer, B=8, P=8, R=8, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, 1000, (B, P + R)).astype(np.int32)
    attn = np.ones_like(ids)
    mask = np.zeros((B, P + R), np.float32)
    mask[:, P:] = 1.0
    zeros = np.zeros_like(mask)
    adv = rng.normal(size=(B, 1)).astype(np.float32) * mask
    return TrainBatch(
        ids,
        attn,
        mask,
        zeros - 5.0,
        adv_BxT=adv,
        old_logp_BxT=zeros - 5.0,
        ref_logp_BxT=zeros - 5.0,
        returns_BxT=adv,
        prompt_len=P,
    )


def test_config_errors_name_the_lora_key():
    for override, key in (
        ("model.lora.rank=-1", "model.lora.rank"),
        ("model.lora.alpha=0.0", "model.lora.alpha"),
        ("model.lora.dropout=1.0", "model.lora.dropout"),
        ("model.lora.targets=('q_proj(',)", "model.lora.targets"),
    ):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            validate(_cfg(override))
    with pytest.raises(ConfigError, match=r"model\.lora\.targets: \['qkv'\].*available: q_proj"):
        build_roles(_cfg("model.lora.targets=('qkv',)"))


def test_only_adapters_train_and_the_reference_is_the_base_model():
    roles = build_roles(_cfg("algorithm.use_kl_loss=True"))
    actor, ref = roles.actor, roles.reference
    frozen = actor.update.frozen
    # The reference is the base itself: the very arrays the actor reads, not a copy.
    assert all(a is b for a, b in zip(jax.tree.leaves(ref.params), jax.tree.leaves(frozen)))
    adapter_keys = set(actor.state.params["layers"])
    assert adapter_keys and all("_lora_" in k for k in adapter_keys)
    # Optimizer state: moments of the adapters and a few scalars, nothing of the base.
    assert num_params(actor.state.opt_state) <= 2 * num_params(actor.state.params) + 8
    base_before = _np(frozen)

    tb = _batch(roles.tokenizer)
    micro, counts = tb.split_rows(8), Counts.of(tb.response_mask_BxT)
    _, grads, _ = actor.update.grads(actor.state.params, micro, counts, frozen)
    assert set(grads["layers"]) == adapter_keys  # gradients exist for the adapters only
    state, metrics = actor.update(actor.state, [micro], counts)  # donates actor.state
    assert np.isfinite(float(metrics["actor/loss"])) and float(metrics["actor/grad_norm"]) > 0
    b_after = np.asarray(state.params["layers"]["q_proj_lora_b"])
    assert np.abs(b_after).max() > 0  # B moved off zero
    for a, b in zip(jax.tree.leaves(base_before), jax.tree.leaves(_np(frozen)), strict=True):
        np.testing.assert_array_equal(a, b)  # the base weights, bitwise unchanged

    # Reference log-probs (adapters off) = the base model's; the actor's (adapters on) differ.
    actor.state = state._replace(params=_random_like(state.params))
    ids, attn = jnp.asarray(tb.input_ids_BxT), jnp.asarray(tb.attention_mask_BxT)
    ref_logp = np.asarray(ref.logprobs(ref.params, ids, attn, prompt_len=8))
    base_model, _ = load_model("tiny-random-llama")
    graphdef, base = nnx.split(base_model)
    want = sequence_logprobs(
        nnx.to_pure_dict(base),
        ids,
        attn,
        graphdef=graphdef,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        chunk=1 << 30,
        prompt_len=8,
    )
    np.testing.assert_allclose(ref_logp, np.asarray(want), atol=1e-6, rtol=0)
    actor_logp = np.asarray(actor.logprobs(actor.state.params, ids, attn, prompt_len=8))
    assert np.abs(actor_logp - ref_logp).max() > 1e-3

    # The engine samples the merged weights: its greedy tokens after a sync are our greedy
    # with the adapters on, and differ from the base model's.
    prompt = roles.tokenizer.encode("Count to five.")
    greedy = sampling_from_config(_cfg(), greedy=True)
    base_tokens = generate(roles.rollout.engine, [prompt], sampling=greedy)[0][0].token_ids
    roles.rollout.sync(actor.state.params)
    tokens = generate(roles.rollout.engine, [prompt], sampling=greedy)[0][0].token_ids
    model = lora_model(actor.graphdef, frozen, actor.state.params)
    ids_1xT = np.zeros((1, len(prompt) + len(tokens)), np.int32)  # one shape: one compile
    ids_1xT[0, : len(prompt)] = prompt
    forward = jax.jit(lambda ids: model(ids))
    for t in range(len(prompt), ids_1xT.shape[1]):  # causal: the padding after t is not seen
        ids_1xT[0, t] = int(jnp.argmax(forward(jnp.asarray(ids_1xT))[0, t - 1]))
    assert tokens == ids_1xT[0, len(prompt) :].tolist() and tokens != base_tokens
    roles.reward.close()


class _Killed(Exception):
    pass


def _run(workdir, *overrides, kill_after_save=None):
    trainer = Trainer(_cfg(*overrides), str(workdir), progress=False)
    if kill_after_save is not None:
        save = trainer.save

        def save_then_die():
            save()
            if trainer.step == kill_after_save:
                raise _Killed

        trainer.save = save_then_die
    try:
        trainer.train()
    except _Killed:
        pass
    return trainer


def test_grpo_with_lora_trains_resumes_and_exports(tmp_path, length_mod_rows):
    opts = (
        f"data.train_files=('{length_mod_rows}',)",
        "reward.num_workers=0",
        "model.lora.dropout=0.1",
        "checkpoint.every_steps=2",
        "eval.at_start=False",
        "eval.at_end=False",
    )
    full = _run(tmp_path / "full", *opts)
    rows = read_metrics(str(tmp_path / "full"))
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(np.isfinite(r["actor/loss"]) and r["train/skipped_updates"] == 0 for r in rows)
    adapters = _np(full.actor.state.params)
    assert all(np.abs(v).max() > 0 for k, v in adapters["layers"].items() if k.endswith("_b"))

    cut = _run(tmp_path / "cut", *opts, kill_after_save=2)
    assert cut.step == 2 and cut.checkpointer.all_steps() == [2]
    resumed = _run(tmp_path / "cut", *opts)
    assert resumed.step == 3
    for a, b in zip(
        jax.tree.leaves(adapters), jax.tree.leaves(_np(resumed.actor.state.params)), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    opt_full, opt_res = _np(full.actor.state.opt_state), _np(resumed.actor.state.opt_state)
    for a, b in zip(jax.tree.leaves(opt_full), jax.tree.leaves(opt_res), strict=True):
        np.testing.assert_array_equal(a, b)
    cut_rows = read_metrics(str(tmp_path / "cut"))
    assert [r["actor/pg_loss"] for r in cut_rows] == [r["actor/pg_loss"] for r in rows]

    # The export is the merged model, and transformers reloads it with our adapters' logits.
    out = tmp_path / "hf"
    argv = ["export", "--config", TINY, "--workdir", str(tmp_path / "full"), "--out", str(out)]
    assert cli_main(argv + [f"--config.{o}" for o in (*LORA, *opts)]) == 0
    ids = np.array([[5, 17, 230, 9, 41, 7], [8, 3, 99, 1000, 4, 2]])
    model = lora_model(full.actor.graphdef, full.actor.update.frozen, full.actor.state.params)
    want = np.asarray(model(jnp.asarray(ids)))
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    import torch

    with torch.no_grad():
        got = hf(input_ids=torch.tensor(ids)).logits.float().numpy()
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
