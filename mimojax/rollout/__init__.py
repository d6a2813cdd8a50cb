"""Agent loops, `Trajectory`, and the typed batches built from trajectories."""

from mimojax.rollout.batch import RolloutBatch, TrainBatch, bucket, build_batch, pack_by_tokens
from mimojax.rollout.trajectory import Trajectory

__all__ = ["RolloutBatch", "TrainBatch", "Trajectory", "bucket", "build_batch", "pack_by_tokens"]
