"""Which model a checkpoint's params belong to: resuming onto another model is refused up front.

The trainer stores `model_fingerprint(config)` in every checkpoint's meta and, on resume,
`check_fingerprint` names every field where the workdir's model differs from the config's.
"""

from __future__ import annotations

from mimojax.checkpoint.faults import CheckpointError

FINGERPRINT_FIELDS = (
    "model_type",
    "vocab_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "tie_word_embeddings",
)


def model_fingerprint(model_config) -> dict:
    """The ModelConfig fields that identify which model a checkpoint's params belong to."""
    return {name: getattr(model_config, name) for name in FINGERPRINT_FIELDS}


def check_fingerprint(saved: dict, current: dict, workdir: str) -> None:
    """Raises CheckpointError listing every field where the checkpoint's model differs."""
    diffs = [
        f"{k} {saved.get(k, 'missing')} vs {current.get(k, 'missing')}"
        for k in sorted(saved.keys() | current.keys())
        if saved.get(k) != current.get(k)
    ]
    if diffs:
        raise CheckpointError(
            f"workdir {workdir} holds a checkpoint of a different model (checkpoint vs config): "
            + ", ".join(diffs)
            + "; use a fresh workdir or the matching model config"
        )
