#!/usr/bin/env bash
# Several nodes (4 x 8 GPUs by default): run this once on every node, NODE_RANK 0..NODES-1.
# JAX's own multi-controller runtime joins them: the trainer calls jax.distributed.initialize
# from JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID (one process per node).
# The default mesh is data=NODES (each node holds a whole tensor=8 copy of the policy: no
# weight traffic between nodes during generation) for Qwen2.5-72B with LoRA.
#
#   COORDINATOR=node0:1234 NODE_RANK=$RANK MODEL_PATH=/models/Qwen2.5-72B-Instruct \
#     scripts/launch/multi_node.sh [--dry-run] [--config.KEY=VALUE ...]
#
# Variables (${VAR:-default}): MODEL, NODES, GPUS_PER_NODE, NODE_RANK, COORDINATOR, and those in
# common.sh (MODEL_PATH, TRAIN_DATA, EVAL_DATA, ROLLOUT_N, BATCH_PROMPTS, LORA_RANK, MESH_*,
# JUDGE_URL, WORKDIR, CONFIG, MIMOJAX).
set -euo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-qwen2.5-72b}
NODES=${NODES:-4}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
NODE_RANK=${NODE_RANK:-0}
COORDINATOR=${COORDINATOR:-localhost:1234}   # host:port of NODE_RANK 0, reachable from all
MESH_DATA=${MESH_DATA:-$NODES}
export JAX_COORDINATOR_ADDRESS=${JAX_COORDINATOR_ADDRESS:-$COORDINATOR}
export JAX_NUM_PROCESSES=${JAX_NUM_PROCESSES:-$NODES}
export JAX_PROCESS_ID=${JAX_PROCESS_ID:-$NODE_RANK}
source scripts/launch/common.sh
launch "$((NODES * GPUS_PER_NODE))"
