"""What each file under benchmarks/results/ is, the command that wrote it, and the page that reads it.

The results page (docs/_ext/results.py) has one section per ``benchmarks/results/**.json`` file;
this table gives each its one-line description and command (the files themselves mostly record
the machine and load, not the command). A new results file without an entry here fails
tests/test_results_page.py, so the page never lists a file it cannot explain.

Each entry: path relative to benchmarks/results/ -> (what it is, the command, the page that
discusses it, relative to docs/).
"""

from __future__ import annotations

_RL = "methods/soft_moe_rl.md"
_DPOT = "methods/dpot.md"

CATALOG: dict[str, tuple[str, str, str]] = {
    "compose/dpot_moe.json": (
        "DPOT with a Soft-MoE channel mixer vs the dense MLP, MoMo-Adam, NS nu=1e-3 (FLOP match and study cells).",
        "python benchmarks/dpot_moe_study.py --steps=200",
        "methods/compose.md"),
    "dpot/h_memory.json": (
        "DPOT-H state and temporaries per device for meshes and batch sizes, with and without remat (compiled, not run).",
        "python benchmarks/dpot_h_memory.py --devices=16 --remat=1,0 "
        "--configs=8x1:8,8x1:32,8x1:128,2x4:32,4x4:64,4x4:256,16x1:256 --out=benchmarks/results/dpot/h_memory.json",
        _DPOT),
    "dpot/official_protocol/study.json": (
        "DPOT vs FNO, denoising, pre-training + fine-tuning on the official protocol (the current study).",
        "python benchmarks/dpot_study.py --config=configs/dpot_study.py "
        "--config.out_dir=benchmarks/results/dpot/official_protocol --config.workdir=runs/dpot_study_official",
        _DPOT),
    "dpot/seeds_vmap.json": (
        "DPOT study cells: 3 vmapped seeds vs seeds one after another, samples/s on 2 cores.",
        "python benchmarks/dpot_study.py --config=configs/dpot_study.py --vmap_check",
        _DPOT),
    "dpot/step_speed.json": (
        "DPOT-Ti train step, jaxlab vs the official PyTorch code, samples/s at 64^2 and 128^2 (loaded machine).",
        "python benchmarks/dpot_step_speed.py --rounds=16 --out=benchmarks/results/dpot/step_speed.json",
        _DPOT),
    "dpot/step_speed_quiet.json": (
        "The DPOT-Ti step-speed comparison rerun on a quiet machine, with the fused variant.",
        "python benchmarks/dpot_step_speed.py --rounds=6 --jax_variants=jax_fused=fused "
        "--out=benchmarks/results/dpot/step_speed_quiet.json",
        _DPOT),
    "dpot/step_speed_quiet_omp_default.json": (
        "The quiet rerun with libgomp's default wait policy for torch (spinning threads).",
        "python benchmarks/dpot_step_speed.py --rounds=6 --jax_variants=jax_fused=fused --omp_wait_policy= "
        "--out=benchmarks/results/dpot/step_speed_quiet_omp_default.json",
        _DPOT),
    "dpot/study.json": (
        "The DPOT vs FNO study before the official protocol (superseded; kept for the record, see the changelog).",
        "python benchmarks/dpot_study.py --config=configs/dpot_study.py (with the switches of the earlier protocol)",
        "changelog.md"),
    "install/import_times.json": (
        "Import time of each jaxlab package after `import jax`, before and after the optional packages became lazy "
        "imports (fresh interpreter each time, CPU seconds, side by side).",
        "python benchmarks/import_times.py --before=main --repeats=3 --out=benchmarks/results/install/import_times.json",
        "getting_started.md"),
    "install/matrix.json": (
        "The install matrix: a fresh venv per Python (3.11, 3.12) and extra, the JAX it resolves and whether the "
        "guide's next command runs.",
        "python benchmarks/install_matrix.py --python=python3.11 --python=python3.12 "
        "--out=benchmarks/results/install/matrix.json",
        "getting_started.md"),
    "moe/moe_layer_speed.json": (
        "The Soft-MoE layer (xla, fused and kernel implementations) against a straightforward version, forward and backward.",
        "python benchmarks/moe_layer_speed.py --rounds=30 --out=benchmarks/results/moe",
        _RL),
    "momo/lr_sweep_digits_cnn.json": (
        "Learning-rate sweep on the digits CNN: test accuracy per optimizer, learning rate and seed.",
        "python benchmarks/momo_lr_sweep.py --config=configs/momo_lr_sweep.py",
        "methods/momo.md"),
    "momo/lr_sweep_digits_mlp.json": (
        "Learning-rate sweep on the digits MLP.",
        "python benchmarks/momo_lr_sweep.py --config=configs/momo_lr_sweep.py",
        "methods/momo.md"),
    "momo/lr_sweep_digits_mlp_noisy.json": (
        "Learning-rate sweep on the digits MLP with noisy labels, with MoMo* / MoMo-Adam* (adapted lower bound).",
        "python benchmarks/momo_lr_sweep.py --config=configs/momo_lr_sweep.py",
        "methods/momo.md"),
    "momo/step_time.json": (
        "Step time of MoMo, MoMo-Adam, optax.contrib's versions, SGD-M and Adam through the shared step.",
        "python benchmarks/momo_step_time.py --out benchmarks/results/momo/step_time.json",
        "methods/momo.md"),
    "ot_clip/coupling_scale.json": (
        "OT-CLIP losses' B x B coupling: per-device memory whole vs split by rows on 8 devices (and on 1-8 devices "
        "for FGW), chunked on one; "
        "step time ratios; the two-tower CLI at batch 16384.",
        "XLA_FLAGS=--xla_force_host_platform_device_count=8 python benchmarks/ot_clip_coupling_scale.py "
        "--out=benchmarks/results/ot_clip/coupling_scale.json",
        "methods/ot_clip.md"),
    "ot_clip/step_time.json": (
        "OT-CLIP losses' step time against the InfoNCE baseline (ratios, loss-only times).",
        "python benchmarks/ot_clip_step_time.py --out=benchmarks/results/ot_clip",
        "methods/ot_clip.md"),
    "ot_clip/study.json": (
        "Two-tower CLIP on scikit-learn's digits: accuracies per loss and setting (clean, low data, noisy labels).",
        "python benchmarks/ot_clip_study.py --config=configs/ot_clip_digits.py",
        "methods/ot_clip.md"),
    "pde_data/accuracy.json": (
        "Generated PDE data against the same run at dt/2 and on a finer grid (relative L2).",
        "python benchmarks/pde_data_accuracy.py --fine=256 --fine_trajectories=2 --trajectories=16",
        _DPOT),
    "pde_data/speed.json": (
        "PDE data generation speed and size per set, the FNO recipe, and the loader's rate (64 trajectories).",
        "python benchmarks/pde_data_speed.py --out=benchmarks/results/pde_data",
        _DPOT),
    "pde_data/speed_ns1e-3_n1000.json": (
        "PDE data generation for 1000 NS nu=1e-3 trajectories (the FNO data set's size).",
        "python benchmarks/pde_data_speed.py --out=benchmarks/results/pde_data --sets=ns_fno_nu1e-03 "
        "--trajectories=1000 --fno_time=0.05 --file=speed_ns1e-3_n1000.json",
        _DPOT),
    "rl/atari_throughput.json": (
        "DQN on Atari (Pong) through envpool: frames/s per head.",
        "python benchmarks/atari_throughput.py --updates 10 --rounds 3 --out benchmarks/results/rl/atari_throughput.json",
        _RL),
    "rl/cleanrl_baseline.json": (
        "A standalone CleanRL-style DQN loop (Python loop, jitted update), frames/s.",
        "cd benchmarks && python rl_cleanrl_baseline.py --steps 4000 --repeats 3 --out results/rl/cleanrl_baseline.json",
        _RL),
    "rl/expert_scaling.json": (
        "The first expert-scaling study (void: halved MSE, window evaluation; see the changelog).",
        "python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py",
        "changelog.md"),
    "rl/expert_scaling_iqm.json": (
        "IQM with 95% CIs of the first expert-scaling study (void).",
        "python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py --report_only",
        "changelog.md"),
    "rl/expert_scaling_speed.json": (
        "Measured rates of the expert-scaling cells, used to size the study (500 updates per cell).",
        "python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py --measure",
        "changelog.md"),
    "rl/expert_scaling_dopamine_recipe.json": (
        "Expert scaling on Dopamine's recipe, Breakout, 30k frames, 3 seeds (superseded by the 60k two-game run).",
        "python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py "
        "--config.workdir=runs/rl_expert_scaling_dopamine_recipe --config.prefix=expert_scaling_dopamine_recipe",
        "changelog.md"),
    "rl/expert_scaling_dopamine_recipe_iqm.json": (
        "IQM with 95% CIs of the 30k-frame Breakout run.",
        "(written with rl/expert_scaling_dopamine_recipe.json)",
        "changelog.md"),
    "rl/expert_scaling_dopamine_recipe_space_invaders.json": (
        "Expert scaling on Dopamine's recipe, SpaceInvaders, 30k frames, 3 seeds (superseded by the 60k run).",
        "python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py --config.base.env.name=space_invaders "
        "--config.workdir=runs/rl_expert_scaling_dopamine_recipe_si "
        "--config.prefix=expert_scaling_dopamine_recipe_space_invaders",
        "changelog.md"),
    "rl/expert_scaling_dopamine_recipe_space_invaders_iqm.json": (
        "IQM with 95% CIs of the 30k-frame SpaceInvaders run.",
        "(written with rl/expert_scaling_dopamine_recipe_space_invaders.json)",
        "changelog.md"),
    "rl/expert_scaling_two_games.json": (
        "Expert scaling on Breakout and SpaceInvaders, 60,000 frames, 3 seeds, Dopamine's recipe (the current study).",
        "python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:two_games",
        _RL),
    "rl/expert_scaling_two_games_iqm.json": (
        "IQM with 95% CIs of the two-game 60k-frame study.",
        "python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:two_games --report_only",
        _RL),
    "rl/momo_dqn.json": (
        "MoMo in deep RL: MoMo-Adam, MoMo-Adam* and Adam over a learning-rate grid in the Soft-MoE DQN.",
        "python benchmarks/rl_study.py --config=configs/rl_momo_dqn.py",
        "methods/compose.md"),
    "rl/momo_dqn_speed.json": (
        "Measured rates of the MoMo-in-DQN cells, used to size that study.",
        "python benchmarks/rl_study.py --config=configs/rl_momo_dqn.py --measure --cells=adam,momo_adam_star",
        "methods/compose.md"),
    "rl/profile.json": (
        "Every part of one jitted DQN call timed, against a matmul peak measured in the same run.",
        "python benchmarks/rl_profile.py --heads=dense,softmoe --num_envs=1,4 --rounds=3 --out benchmarks/results/rl/profile.json",
        _RL),
    "rl/per_speed.json": (
        "Prioritised replay's priorities on XLA:CPU: jaxlab's fan-out-16 sum tree vs flashbax's sum tree, a binary "
        "tree and a flat cumulative sum (add + sample 32 + update, capacities 100k and 1M).",
        "python benchmarks/rl_per_speed.py --rounds 15 --out benchmarks/results/rl/per_speed.json",
        _RL),
    "rl/der_cost.json": (
        "The cost of the der preset on this CPU: s per 1k agent steps, dense vs Soft-MoE head, one seed.",
        "python benchmarks/rl_der_study.py --measure --games=Pong --seeds=1 --measure_steps=40",
        _RL),
    "rl/der_smoke_time.json": (
        "The DER smoke run's time (tiny network, 300 agent steps, one seed; wall and CPU seconds, with the load).",
        "python benchmarks/rl_der_study.py --size=tiny --seeds=1 --agent_steps=300 --eval_episodes=2 "
        "--workdir=\"$WORKDIR/der\" --out=\"$WORKDIR/der.json\"",
        _RL),
    "rl/der_cost_3_seeds.json": (
        "The same with three vmapped seeds.",
        "python benchmarks/rl_der_study.py --measure --games=Pong --seeds=3 --measure_steps=40 "
        "--measure_out=benchmarks/results/rl/der_cost_3_seeds.json",
        _RL),
    "rl/noise_speed.json": (
        "What Dopamine's noise costs a DER TD update on this CPU: head-only noise, head + hidden layer + experts "
        "with one draw per batch, and one draw per row, dense and Soft-MoE heads, side by side.",
        "python benchmarks/rl_noise_speed.py --out benchmarks/results/rl/noise_speed.json",
        _RL),
    "rl/rejax_throughput.json": (
        "jaxlab's DQN beside rejax 0.1.3's, the same QNetwork in both, dense and Soft MoE, 1 and 8 vmapped seeds.",
        "benchmarks/rl_rejax_throughput.sh --frames=1000 --repeats=3 --out=benchmarks/results/rl/rejax_throughput.json",
        _RL),
    "rl/rejax_throughput_smoke.json": (
        "A short re-measure beside rejax after the loop stopped computing metrics on the calls it does not log "
        "(Soft MoE and dense, one seed, 2k frames; noisy, on a loaded machine).",
        "python benchmarks/rl_rejax_throughput.py --heads=softmoe,dense --seeds=1 --loops=ours4,rejax --frames=2000 "
        "--repeats=3 --chunk=1 --out=benchmarks/results/rl/rejax_throughput_smoke.json",
        _RL),
    "rl/expert_scaling_router_cost.json": (
        "CPU seconds per 1k frames of the expert-scaling cells (3 vmapped seeds) and the CPU estimate of the 200k-frame "
        "re-run with the router fix (configs/rl_expert_scaling.py:router).",
        "nice -n 10 python benchmarks/rl_router_diagnosis.py --measure --config=configs/rl_expert_scaling.py:router "
        "--config.measure_steps=1000 --cells=dense,dense_x4,dense_x8,softmoe_1,softmoe_2,softmoe_4,softmoe_8",
        _RL),
    "rl/router_diagnosis.json": (
        "Why the Soft-MoE router does not learn on MinAtar: routing entropies, combine spread, router gradient vs "
        "Adam's eps, Q spread and returns per router option (softmoe, normalize, adam_eps; position_embedding on "
        "Breakout; the rest cut for time), Breakout and SpaceInvaders, 3 seeds, 60k frames.",
        "python benchmarks/rl_router_diagnosis.py --cells=softmoe,normalize,adam_eps,breakout/position_embedding",
        _RL),
    "rl/router_diagnosis_cost.json": (
        "CPU seconds per 1k frames of each router-study variant (3 vmapped seeds), with and without the diagnostics.",
        "nice -n 10 python benchmarks/rl_router_diagnosis.py --measure",
        _RL),
    "rl/td_update_speed.json": (
        "The jitted DQN's TD update and its parts on XLA:CPU, against the CleanRL-style loop.",
        "cd benchmarks && python rl_td_update_speed.py --k 100 --rounds 5 --out results/rl/td_update_speed.json",
        _RL),
    "rl/td_update_speed_no_fusion_emitters.json": (
        "The same with XLA:CPU's fusion emitters off (an earlier script version, 3 rounds).",
        "cd benchmarks && XLA_FLAGS=--xla_cpu_use_fusion_emitters=false python rl_td_update_speed.py --k 100 --rounds 3",
        _RL),
    "rl/throughput.json": (
        "Whole-training throughput of the DQN task vs a CleanRL-style loop, quiet machine (the first measurement).",
        "python benchmarks/rl_throughput.py --rounds=3 --seed_heads=dense --out benchmarks/results/rl/throughput.json",
        _RL),
    "rl/throughput_load6.json": (
        "The same benchmark at load 6 (three other jobs), with the Soft-MoE seeds table.",
        "python benchmarks/rl_throughput.py --rounds=3 ... --out benchmarks/results/rl/throughput_load6.json (the file does not record its other flags)",
        _RL),
    "rl/throughput_issue21.json": (
        "Throughput after the speed-up, dense and Soft MoE, against the matmul peak of the same run.",
        "python benchmarks/rl_throughput.py --heads=dense,softmoe --rounds=3 --seed_heads=dense,softmoe "
        "--out benchmarks/results/rl/throughput_issue21.json",
        _RL),
    "rl/throughput_issue21_2dev.json": (
        "The same with the seeds sharded over 2 CPU devices.",
        "python benchmarks/rl_throughput.py --heads=dense,softmoe --rounds=3 --seed_heads=dense,softmoe --seed_devices=2 "
        "--out benchmarks/results/rl/throughput_issue21_2dev.json",
        _RL),
    "train/step_overhead.json": (
        "The shared train step against a hand-written jitted optax step (MLP 1.13M params, batch 256, Adam).",
        "python benchmarks/train_step_overhead.py --out benchmarks/results/train/step_overhead.json",
        "design.md"),
    "train/task_scaling.json": (
        "The scaling contract: each task's compiled train step at 1, 2, 4 and 8 devices, per-device batch, state "
        "and temporaries against the contract's bounds (compile only).",
        "XLA_FLAGS=--xla_force_host_platform_device_count=8 python benchmarks/task_scaling.py "
        "--out=benchmarks/results/train/task_scaling.json",
        "guides/sharding.md"),
}
