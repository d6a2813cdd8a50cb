#!/usr/bin/env bash
# One node, 8 GPUs: 14B-72B LoRA (Qwen2.5-72B by default; tensor=8 inside the node).
#
#   MODEL_PATH=/models/Qwen2.5-72B-Instruct scripts/launch/one_node.sh [--dry-run] [--config.KEY=VALUE ...]
#
# Variables (${VAR:-default}): MODEL, GPUS, and those in common.sh (MODEL_PATH, TRAIN_DATA,
# EVAL_DATA, ROLLOUT_N, BATCH_PROMPTS, LORA_RANK, MESH_DATA, MESH_FSDP, MESH_TENSOR, JUDGE_URL,
# WORKDIR, CONFIG, MIMOJAX). One process drives every GPU of the node.
set -euo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-qwen2.5-72b}
GPUS=${GPUS:-8}
source scripts/launch/common.sh
launch "$GPUS"
