"""The GPU path lowers: every kernel exports for CUDA as Triton calls, checked without a GPU.

Lowering is where Pallas rejects ops Triton cannot express; each Triton module is also run
through the MLIR verifier here, which is what XLA's Triton parser runs first on a GPU (an
unverifiable `scf.for` was found that way on an H200: scripts/gpu_check.py). PTX compilation
and speed still need a GPU (scripts/gpu_check.py, scripts/bench_attention.py).
"""

import jax
import jax.numpy as jnp
import pytest
from jax import export
from jax._src.pallas.triton import pallas_call_registration  # private: the verifier hook only

from mimojax.kernels import decode_attention, flash_attention

TRITON_CALL = "__gpu$xla.gpu.triton"


@pytest.fixture(autouse=True)
def verified_modules(monkeypatch):
    """Every Triton module lowered during a test goes through MLIR's verifier; failures listed."""
    failures: list[str] = []
    lower = pallas_call_registration.lowering.lower_jaxpr_to_triton_module

    def lower_and_verify(*args, **kwargs):
        result = lower(*args, **kwargs)
        try:
            result.module.operation.verify()
        except Exception as e:  # MLIRError: the message names the op and its location
            failures.append(str(e)[:500])
        return result

    monkeypatch.setattr(
        pallas_call_registration.lowering, "lower_jaxpr_to_triton_module", lower_and_verify
    )
    yield failures
    assert not failures, "a Triton module fails MLIR verification:\n" + "\n".join(failures)


def _triton_kernels(fn, *avals) -> list[str]:
    """Names of the Triton kernels in fn's CUDA lowering."""
    exported = export.export(
        jax.jit(fn),
        platforms=["cuda"],
        # Triton calls carry no serialization guarantee; only the lowering is under test.
        disabled_checks=[export.DisabledSafetyCheck.custom_call(TRITON_CALL)],
    )(*avals)
    lines = exported.mlir_module().splitlines()
    return [ln.split('name = "')[1].split('"')[0] for ln in lines if TRITON_CALL in ln]


@pytest.mark.parametrize(
    "b,t,s,h,k,d,dtype",
    [
        (2, 256, 256, 16, 4, 64, jnp.bfloat16),  # training, GQA
        (1, 200, 200, 8, 1, 128, jnp.bfloat16),  # MQA, length needing a padded tile
        (2, 8, 40, 4, 2, 8, jnp.float32),  # tiny test dims: prefill into a cache
    ],
)
def test_flash_forward_and_backward_lower_to_triton(b, t, s, h, k, d, dtype):
    def fwd_bwd(q, k, v, positions, valid, do):
        attn = lambda q, k, v: flash_attention(q, k, v, positions, valid, interpret=False)
        out, vjp = jax.vjp(attn, q, k, v)
        return out, vjp(do)

    q = jax.ShapeDtypeStruct((b, t, h, d), dtype)
    kv = jax.ShapeDtypeStruct((b, s, k, d), dtype)
    positions = jax.ShapeDtypeStruct((b, t), jnp.int32)
    valid = jax.ShapeDtypeStruct((b, s), jnp.bool_)
    kernels = _triton_kernels(fwd_bwd, q, kv, kv, positions, valid, q)
    assert kernels == ["mimojax_flash_fwd", "mimojax_flash_bwd_dq", "mimojax_flash_bwd_dkdv"]


@pytest.mark.parametrize("h,k,d", [(32, 8, 128), (4, 1, 16)])
def test_decode_lowers_to_triton(h, k, d):
    decode = lambda q, k, v, n: decode_attention(q, k, v, n, interpret=False)
    q = jax.ShapeDtypeStruct((3, h, d), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((3, 4096, k, d), jnp.bfloat16)
    lengths = jax.ShapeDtypeStruct((3,), jnp.int32)
    assert _triton_kernels(decode, q, kv, kv, lengths) == ["mimojax_decode_attention"]
