"""Every mimojax knob, with its default; experiment configs start from this one.

Not a run by itself: it names no data. Experiment configs (`configs/grpo_*.py`)
call `get_config()` here and change what they need. Knob names follow verl
where verl has one; a comment gives verl's name where ours differs.

Launch: `mimojax info --config configs/base.py` (shows the mesh these defaults build).
Hardware: any. Time / reward: not applicable.
"""

from ml_collections import ConfigDict
from ml_collections.config_dict import placeholder

from mimojax.config.loader import parse_config_args


def get_config(arg=None):
    """Return the locked base config (takes no args)."""
    parse_config_args(arg, {})
    cfg = ConfigDict()

    cfg.model = m = ConfigDict()
    m.name_or_path = "smollm2-135m-instruct"  # registry name, HF dir, or .gguf (verl: model.path)
    m.dtype = "bfloat16"  # compute dtype: "float32" | "bfloat16"
    m.param_dtype = "float32"  # dtype of stored weights and optimizer state
    m.attention_impl = "xla"  # attention: "xla" (portable) | "pallas" (our kernels) | "cudnn"
    m.value_head = False  # add a scalar value head (the critic); needed by adv_estimator="gae"
    m.remat = "dots"  # layer recompute in backward: none|full|dots (verl: gradient_checkpointing)
    m.logprob_chunk_size = 1024  # tokens per logits chunk when computing logprobs; 0 = no chunks
    # LoRA adapters (verl: model.lora_rank / lora_alpha / target_modules); rank 0 = off.
    m.lora = lo = ConfigDict()
    lo.rank = 0  # adapter rank r; > 0 trains only the adapters (the base weights stay frozen)
    lo.alpha = 16.0  # scale alpha / r on the adapter's output
    lo.dropout = 0.0  # dropout on the adapter's input during training
    lo.targets = (r".*_proj",)  # regexes over linear names (q|k|v|o|gate|up|down_proj): all

    cfg.mesh = mesh = ConfigDict()  # device mesh; axis sizes, -1 = all remaining devices
    mesh.data = 1  # pure data parallelism (params replicated)
    mesh.fsdp = -1  # data parallelism with params and optimizer state sharded
    mesh.tensor = 1  # tensor (model) parallelism inside each layer

    cfg.sharding = sh = ConfigDict()
    sh.preset = "fsdp"  # logical-axis rules: "fsdp" | "fsdp_tensor"
    # Per-logical-axis override of the preset's rule (mimojax.sharding.RULES_PRESETS):
    # None keeps the preset's rule, "" replicates, "fsdp" or "data,fsdp" shards over those axes.
    sh.overrides = ov = ConfigDict()
    ov.batch = placeholder(str)  # activation batch
    ov.vocab = placeholder(str)  # vocabulary (embedding and LM head)
    ov.embed = placeholder(str)  # hidden size
    ov.heads = placeholder(str)  # query heads
    ov.kv_heads = placeholder(str)  # key/value heads
    ov.head_dim = placeholder(str)  # per-head size
    ov.mlp = placeholder(str)  # MLP intermediate size
    ov.layers = placeholder(str)  # stacked-layer axis

    # Where each role runs (mimojax/train/roles.py). Colocated by default: actor, reference,
    # critic and the rollout engine time-share every device on the `mesh` above. Giving the rollout
    # its own device indices splits the roles: weights are resharded onto the rollout mesh at each
    # sync.
    cfg.roles = roles = ConfigDict()
    roles.actor = ra = ConfigDict()
    ra.devices = ()  # indices into jax.devices() for actor/reference/critic; () = all the rest
    roles.rollout = rr = ConfigDict()
    rr.devices = ()  # indices for the engine; () = colocated with the actor
    rr.mesh = rm = ConfigDict()  # the engine's mesh over its devices, as `mesh` above
    rm.data = 1  # slots (sequences) split over these devices
    rm.fsdp = -1  # weights sharded; -1 = the rest of the rollout devices
    rm.tensor = 1  # tensor parallelism inside each layer

    cfg.data = d = ConfigDict()
    d.train_files = ()  # training prompt files (verl: data.train_files)
    d.eval_files = ()  # evaluation prompt files (verl: data.val_files)
    d.prompt_key = "prompt"  # field of each record that holds the prompt
    d.max_prompt_length = 512  # prompt tokens at most (verl: data.max_prompt_length)
    d.shuffle = True  # shuffle training prompts each epoch
    d.seed = 0  # shuffle seed
    d.batch_size = 32  # prompts per RL step (verl: data.train_batch_size)
    d.system_prompt = placeholder(str)  # system message put before plain-prompt rows; None = none
    d.default_env = placeholder(str)  # grader for rows without an "env" field; None = required
    # Difficulty-aware sampling (mimojax/data/difficulty.py): prompts whose graded samples so far
    # all passed or all failed are drawn with probability `floor` instead of 1 (history kept across
    # epochs, checkpointed with the data position); data/difficulty/* metrics.
    d.difficulty = dd = ConfigDict()
    dd.enable = False  # draw prompts by their solve history (off: every prompt equally)
    dd.floor = 0.1  # acceptance probability of an always- or never-solved prompt, (0, 1]
    dd.success_threshold = 1.0  # a sample counts as solved when its score >= this

    cfg.rollout = r = ConfigDict()  # (verl: actor_rollout_ref.rollout)
    r.n = 8  # samples per prompt
    r.temperature = 1.0  # 0 = greedy
    r.top_p = 1.0  # nucleus sampling; 1.0 = off
    r.top_k = -1  # top-k sampling; -1 or 0 = off
    r.max_new_tokens = 1024  # response tokens at most (verl: data.max_response_length)
    r.max_concurrent_decodes = 256  # sequences decoded at once (verl: rollout.max_num_seqs)
    r.stop_token_ids = ()  # extra ids that end a response, besides the tokenizer's EOS ids
    r.prompt_overflow = "error"  # prompt > data.max_prompt_length: "error" | "truncate_left"
    r.seed = 0  # sampling seed; each prompt and sample derives its own key from it
    r.pipeline_decode = True  # engine dispatches decode step t+1 before reading step t's tokens
    # Agent loops: rows pick theirs with an "agent" field; the limits end a trajectory with
    # their own finish reason (agent_loop/finish/*). max_new_tokens above bounds each turn.
    r.agent = ag = ConfigDict()
    ag.default = "single_turn"  # loop for rows without "agent": "single_turn" | "tool_agent"
    ag.max_turns = 4  # model turns per trajectory
    ag.max_tool_calls = 8  # tool calls per trajectory
    ag.max_response_tokens = 512  # model + tool-observation tokens after the prompt
    ag.max_wall_s = 120.0  # wall-clock seconds per trajectory
    ag.reuse_kv = True  # later turns continue the earlier turns' KV cache (prefill new tokens)

    # Model-written code (tools and graders) runs under bubblewrap; see mimojax/sandbox/bwrap.py.
    cfg.sandbox = sb = ConfigDict()
    sb.timeout_s = 5.0  # wall-clock limit of one tool call
    sb.memory_mb = 512  # address-space limit of one tool call
    sb.allow_unsandboxed = False  # run without bwrap (NOT isolated; warns on every call)

    cfg.algorithm = a = ConfigDict()
    a.adv_estimator = "grpo"  # advantage estimator name (verl: algorithm.adv_estimator)
    a.policy_loss = "vanilla"  # policy loss name (verl: actor.policy_loss.loss_mode)
    a.loss_agg_mode = "token-mean"  # token losses to a scalar (verl: actor.loss_agg_mode)
    a.clip_ratio_low = 0.2  # PPO ratio clipped below at 1 - this (verl: actor.clip_ratio_low)
    a.clip_ratio_high = 0.2  # PPO ratio clipped above at 1 + this (verl: actor.clip_ratio_high)
    a.clip_ratio_c = 3.0  # dual-clip bound for negative advantages (verl: actor.clip_ratio_c)
    a.gamma = 1.0  # discount (GAE and returns)
    a.lam = 1.0  # GAE lambda
    a.norm_adv_by_std_in_grpo = True  # divide GRPO advantages by the group std (False: Dr.GRPO)
    a.use_kl_loss = False  # KL(actor || reference) as a loss term (verl: actor.use_kl_loss)
    a.kl_loss_coef = 0.001  # its weight (verl: actor.kl_loss_coef)
    a.kl_loss_type = "k3"  # KL estimator: k1 | k2 | k3 (verl: actor.kl_loss_type, low_var_kl)
    a.use_kl_in_reward = False  # KL penalty folded into the reward instead; not with use_kl_loss
    a.kl_ctrl = kc = ConfigDict()  # in-reward KL coefficient control (verl: algorithm.kl_ctrl)
    kc.type = "fixed"  # "fixed" | "adaptive"
    kc.kl_coef = 0.001  # initial / fixed coefficient
    kc.target_kl = 0.1  # adaptive: KL the controller steers towards
    kc.horizon = 10000  # adaptive: steps over which it adapts
    a.entropy_coeff = 0.0  # entropy bonus weight (verl: actor.entropy_coeff)
    # ... or an entropy target (Skywork-OR1's adaptive entropy control): a bonus only while the
    # policy's entropy (at the rollout temperature) is below `target`, its weight walking by
    # `delta` a step within [0, max_coeff] (mimojax/algos/entropy_control.py). 0 = off.
    a.entropy_control = ec = ConfigDict()
    ec.target = 0.0  # mean token entropy to hold (Skywork-OR1 used 0.2); excludes entropy_coeff
    ec.delta = 0.005  # coefficient step per RL step
    ec.max_coeff = 0.05  # the coefficient's ceiling
    # DAPO dynamic sampling: groups whose samples all scored the same carry no signal; they are
    # masked out of the update (verl: algorithm.filter_groups.enable; we mask, not resample).
    a.filter_groups = False  # drop (mask) zero-variance groups from the update
    # ... or resample (verl: algorithm.filter_groups.max_num_gen_batches): keep generating
    # batches of data.batch_size prompts until the step holds data.batch_size groups whose
    # scores differ, at most max_num_gen_batches batches; a step still short is filled with
    # uninformative groups (masked) and counted (train/groups_short).
    # Responses cut off by rollout.max_new_tokens (or an agent's budget): "keep" (as graded),
    # "mask" (DAPO's overlong filtering, TRL's mask_truncated_completions: no loss on them,
    # still in the group baseline) or "zero" (reward 0: a cut-off answer earns nothing; group
    # filtering and dynamic sampling's informative count both see the zeros).
    a.truncated_responses = "keep"  # "keep" | "mask" | "zero"
    a.dynamic_sampling = dsp = ConfigDict()
    dsp.enable = False  # implies filter_groups
    dsp.max_num_gen_batches = 4  # generation batches per step at most (>= 1)
    # Correcting for the engine's sampling distribution differing from the trainer's
    # (stale policy, numerics). Names follow verl's algorithm.rollout_correction.
    a.rollout_correction = rc = ConfigDict()
    rc.rollout_is = placeholder(str)  # importance weights: None | "token" | "sequence"
    rc.rollout_is_threshold = 2.0  # truncate importance weights above this
    rc.rollout_is_batch_normalize = False  # rescale importance weights to mean 1 per batch
    rc.rollout_rs = placeholder(str)  # rejection sampling mode; None = off
    rc.rollout_rs_threshold = placeholder(float)  # reject samples whose ratio exceeds this
    rc.rollout_rs_threshold_lower = placeholder(float)  # ... or falls below this
    rc.rollout_token_veto_threshold = placeholder(float)  # drop sequences with a token below
    rc.bypass_mode = False  # use the engine's logprobs as PPO old logprobs (no recompute)

    cfg.optimizer = o = ConfigDict()  # (verl: actor.optim)
    o.name = "adamw"  # optimizer
    o.lr = 1e-6  # peak learning rate
    o.betas = (0.9, 0.999)  # Adam betas
    o.eps = 1e-8  # Adam epsilon
    o.weight_decay = 0.01  # decoupled weight decay
    o.warmup_steps = 0  # linear warmup steps (verl: optim.lr_warmup_steps)
    o.schedule = "constant"  # after warmup: "constant" | "cosine" | "linear" (verl: warmup_style)
    o.min_lr_ratio = 0.0  # cosine/linear decay floor, as a fraction of lr
    o.grad_clip = 1.0  # global gradient-norm clip; 0 = off (verl: actor.grad_clip)

    cfg.critic = cr = ConfigDict()  # the value model, used when adv_estimator needs values (gae)
    cr.lr = 1e-5  # its peak learning rate (verl: critic.optim.lr); other optimizer knobs shared
    cr.cliprange_value = 0.5  # value clipping around the old values (verl: critic.cliprange_value)
    cr.warmup_steps = 0  # steps the critic trains before the actor starts (verl: critic_warmup)

    cfg.reward = rw = ConfigDict()  # the reward pool
    rw.backend = "local"  # "local" (worker processes here) | "ray" (Ray tasks on a cluster)
    rw.ray_address = "auto"  # backend "ray": cluster to join; "auto" = running, "local" = new
    rw.num_workers = 2  # grader processes; 0 = grade in the trainer process (no timeouts)
    rw.timeout_s = 10.0  # a grader call past this is killed and flagged as an infra failure
    rw.overlong_buffer = ob = ConfigDict()  # DAPO soft overlong punishment
    ob.enable = False  # (verl: reward_model.overlong_buffer.enable)
    ob.len = 64  # tokens before max_new_tokens where the linear penalty starts
    ob.penalty_factor = 1.0  # penalty at max_new_tokens

    cfg.eval = ev = ConfigDict()  # held-out evaluation on data.eval_files
    ev.max_examples = 0  # evaluate on the first this-many eval rows; 0 = all
    ev.pass_k = 0  # also sample k responses per prompt (rollout sampling settings) for pass@k
    ev.at_start = True  # with data.eval_files: evaluate the starting model (the "before" number)
    ev.at_end = True  # ... and the final one, whatever trainer.eval_every says

    cfg.trainer = t = ConfigDict()
    t.total_steps = 100  # RL steps (verl: trainer.total_training_steps)
    t.ppo_epochs = 1  # passes over each rollout batch (verl: actor.ppo_epochs)
    t.mini_batch_size = 8  # prompts per optimizer update (verl: actor.ppo_mini_batch_size)
    # Samples (not prompts) per forward/backward pass across all devices; gradients
    # accumulate over mini_batch_size * rollout.n / micro_batch_size passes.
    t.micro_batch_size = 16  # (verl: actor.ppo_micro_batch_size, global rather than per GPU)
    # 0 = row micro-batches of micro_batch_size; >0 = token-budget micro-batches, each at most
    t.micro_batch_tokens = 0  # this many padded tokens (verl: ppo_max_token_len_per_gpu)
    t.eval_every = 0  # steps between evaluations; 0 = never (verl: trainer.test_freq)
    t.seed = 0  # seed of params init, sampling and dropout RNG streams
    t.workdir = "runs/default"  # metrics, checkpoints and report (verl: default_local_dir)
    t.time_limit_minutes = 0.0  # stop after this much training wall time (eval excluded); 0 = off
    t.eval_at_minutes = ()  # also evaluate when training wall time first passes each of these
    t.shuffle_mini_batches = True  # permute samples before splitting into mini-batches
    # Async RL (mimojax/rollout/async_buffer.py): "sync" = generate then train; "one_step_off" =
    # step t+1's rollout overlaps step t's update (staleness exactly 1); "async" = a producer
    # fills a bounded buffer, weights synced to it every `sync_every_steps` updates.
    t.mode = "sync"  # "sync" | "one_step_off" | "async"
    t.max_off_policy_steps = 1  # async: staleness bound (trainer version - rollout version), >= 0
    t.staleness_policy = "wait"  # async: "wait" (producer blocks at the bound) | "drop" (discard)
    t.sync_every_steps = 1  # async: publish weights to the rollout every k updates; needs
    # max_off_policy_steps >= k - 1 (staleness still counts every update)
    t.partial_rollouts = False  # async: weights published mid-batch reach the engine between
    # decode steps; in-flight trajectories continue under them (versions recorded per token,
    # staleness counted on the oldest token)
    t.flow = "batch"  # async: "batch" (a step's groups, generated together) | "stream" (one
    # continuous engine queue; gae trains on the first batch_size * n trajectories to finish,
    # group estimators on the first batch_size whole groups: queue/group_wait_s)
    t.long_response_tokens = 0  # async/long_share/* (short-task bias): responses longer than this
    # count as long; 0 = longer than the median of the step's sampled responses

    cfg.logging = lg = ConfigDict()
    lg.jsonl = True  # write metrics to <workdir>/metrics.jsonl
    lg.wandb = wb = ConfigDict()
    wb.mode = "offline"  # "online" | "offline" | "disabled"
    wb.project = "mimojax"  # (verl: trainer.project_name)
    wb.entity = placeholder(str)  # team or user; None = wandb's default
    wb.name = placeholder(str)  # run name; None = derived from the config file

    cfg.checkpoint = ck = ConfigDict()
    ck.every_steps = 50  # steps between checkpoints; 0 = never (verl: trainer.save_freq)
    ck.keep = 3  # checkpoints kept (verl: trainer.max_actor_ckpt_to_keep)
    ck.async_save = True  # write checkpoints in the background
    # SIGTERM / SIGINT stop the run at the next safe point and save a checkpoint; set this to
    # what the platform allows between SIGTERM and SIGKILL (docker stop: 10 s, Kubernetes: 30 s).
    ck.preemption_grace_s = 30.0  # seconds; a stop whose save takes longer says so

    # Prices for the cost figures of the report and dashboard (mimojax/observe/run_costs.py);
    # recorded in run_info.json. 0 = unknown: then they show device- and CPU-seconds but no $.
    cfg.cost = co = ConfigDict()
    co.device_per_hour = 0.0  # $ per accelerator-hour (each of the run's devices, held all along)
    co.cpu_per_hour = 0.0  # $ per host CPU-core-hour (each core of the trainer host)

    cfg.lock()
    return cfg
