# Sourced by one_gpu.sh, one_node.sh and multi_node.sh: the variables they share and `launch`.
#
# Every setting is a ${VAR:-default}; the script's own arguments ("$@") are passed to the config
# as overrides (`--config.KEY=VALUE`), and `--dry-run` among them prints the resolved config, the
# mesh and `mimojax plan`'s memory/step-time table instead of training.

MIMOJAX=${MIMOJAX:-mimojax}                  # the CLI (e.g. ".venv/bin/mimojax")
CONFIG=${CONFIG:-configs/grpo_qwen.py}
MODEL_PATH=${MODEL_PATH:-}                   # HF dir of the weights; never downloaded here
TRAIN_DATA=${TRAIN_DATA:-}                   # JSONL/Parquet prompts; empty: the config's
EVAL_DATA=${EVAL_DATA:-}
ROLLOUT_N=${ROLLOUT_N:-}                     # samples per prompt; empty: the config's
BATCH_PROMPTS=${BATCH_PROMPTS:-}             # prompts per step; empty: the config's
LORA_RANK=${LORA_RANK:--1}                   # -1: the model size's default, 0: all weights
MESH_DATA=${MESH_DATA:-}                     # mesh axes; empty: the config's (fsdp=-1 = the rest)
MESH_FSDP=${MESH_FSDP:-}
MESH_TENSOR=${MESH_TENSOR:-}
JUDGE_URL=${JUDGE_URL:-}                     # an OpenAI-compatible judge for rubric graders
WORKDIR=${WORKDIR:-runs/${MODEL}}
# XLA may take 95% of each card; `mimojax plan` counts a plan as fitting at 90% (the rest is
# CUDA context and library workspaces).
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.95}
if [ -n "$JUDGE_URL" ]; then
  export MIMOJAX_JUDGE_URL="$JUDGE_URL"       # read by graders that call a judge model
fi

DRY_RUN=0
OVERRIDES=()
for arg in "$@"; do
  if [ "$arg" = "--dry-run" ]; then DRY_RUN=1; else OVERRIDES+=("$arg"); fi
done

# The config spec and the overrides the variables above ask for, then the caller's own.
spec_and_overrides() {
  SPEC="${CONFIG}:model=${MODEL},lora=${LORA_RANK}"
  if [ -n "$MODEL_PATH" ]; then SPEC="${SPEC},path=${MODEL_PATH}"; fi
  ARGS=()
  if [ -n "$TRAIN_DATA" ]; then ARGS+=("--config.data.train_files=${TRAIN_DATA}"); fi
  if [ -n "$EVAL_DATA" ]; then ARGS+=("--config.data.eval_files=${EVAL_DATA}"); fi
  if [ -n "$ROLLOUT_N" ]; then ARGS+=("--config.rollout.n=${ROLLOUT_N}"); fi
  if [ -n "$BATCH_PROMPTS" ]; then ARGS+=("--config.data.batch_size=${BATCH_PROMPTS}"); fi
  if [ -n "$MESH_DATA" ]; then ARGS+=("--config.mesh.data=${MESH_DATA}"); fi
  if [ -n "$MESH_FSDP" ]; then ARGS+=("--config.mesh.fsdp=${MESH_FSDP}"); fi
  if [ -n "$MESH_TENSOR" ]; then ARGS+=("--config.mesh.tensor=${MESH_TENSOR}"); fi
  ARGS+=("${OVERRIDES[@]}")
}

# launch TOTAL_DEVICES: train, or with --dry-run print the config, mesh and plan.
launch() {
  local devices=$1
  spec_and_overrides
  if [ "$DRY_RUN" = 1 ]; then
    echo "dry run: $MIMOJAX train --config $SPEC --workdir $WORKDIR ${ARGS[*]}"
    echo "devices: $devices total; JAX_COORDINATOR_ADDRESS=${JAX_COORDINATOR_ADDRESS:-unset}" \
      "JAX_NUM_PROCESSES=${JAX_NUM_PROCESSES:-unset} JAX_PROCESS_ID=${JAX_PROCESS_ID:-unset}"
    exec "$MIMOJAX" plan --config "$SPEC" --devices "$devices" --print-config "${ARGS[@]}"
  fi
  exec "$MIMOJAX" train --config "$SPEC" --workdir "$WORKDIR" "${ARGS[@]}"
}
