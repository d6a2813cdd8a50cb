#!/usr/bin/env bash
# One GPU (the 24 GB pilot): learn the loop on Qwen2.5-0.5B, all weights trained.
#
#   MODEL_PATH=/models/Qwen2.5-0.5B-Instruct scripts/launch/one_gpu.sh [--dry-run] [--config.KEY=VALUE ...]
#
# Variables (${VAR:-default}): MODEL, GPU, and those in common.sh (MODEL_PATH, TRAIN_DATA,
# EVAL_DATA, ROLLOUT_N, BATCH_PROMPTS, LORA_RANK, MESH_*, JUDGE_URL, WORKDIR, CONFIG, MIMOJAX).
# On an 80 GB card the same script runs the 7B LoRA pilot: MODEL=qwen2.5-7b.
set -euo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-qwen2.5-0.5b}
GPU=${GPU:-0}
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-$GPU}
source scripts/launch/common.sh
launch 1
