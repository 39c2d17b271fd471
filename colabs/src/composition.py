# %% [markdown]
# # Four methods, one train step
#
# jaxlab turns four ICML 2024 methods into components of one sharded train step,
# `jaxlab.train.make_train_step`:
#
# | method | paper | what it plugs into the step |
# |---|---|---|
# | MoMo | Schaipp et al., *MoMo: Momentum Models for Adaptive Learning Rates* | the optimizer (receives `value=loss`) |
# | OT-CLIP | Shi et al., *Understanding and Improving Optimal Transport in Contrastive Learning* (OT-CLIP) | the loss, on the global (sharded) batch |
# | Soft-MoE DQN | Obando-Ceron et al., *Mixtures of Experts Unlock Parameter Scaling for Deep RL* | the network, `collect` (acting + replay on the device) and `update_extra` (target network) |
# | DPOT | Hao et al., *DPOT: Auto-Regressive Denoising Operator Transformer* | the model and its tensor-parallel sharding rules |
#
# This notebook shows the step, runs each method through it (the quickstart's experiments), and
# trains DPOT on an 8-device mesh (8 virtual CPU devices here; the same code runs on 8 GPUs/TPUs).

# %%
# this notebook's jaxlab extras (setup.cfg) and the modules it imports, itself or via jaxlab
EXTRAS = "data,rl,pde,notebooks"
MODULES = ["jaxlab", "matplotlib", "sklearn", "gymnax", "flashbax", "exponax"]
import os  # 8 virtual CPU devices for the mesh below; XLA reads this when jax starts its backends
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
                             " --xla_cpu_collective_call_terminate_timeout_seconds=900").strip()
# Where jaxlab is installed from on Colab or a fresh machine: EDIT THIS LINE to your copy of the
# repository, any pip source: git+https://<host>/<owner>/jaxlab (git+...@<commit> pins it), a local
# folder or a wheel. On Colab it is also the form field at the right. $JAXLAB_SOURCE, when set,
# wins over this line (colabs/README.md).
JAXLAB_SOURCE = ""  # @param {type:"string"}
# Nothing is installed when every module in MODULES is importable (locally and in the tests this
# does nothing); else jaxlab is installed with the extras this notebook needs. find_spec looks a
# module up without importing it. On a GPU/TPU runtime the preinstalled jax is pinned, so its
# accelerator backend stays. If an extra cannot go beside it (the rl extra's gymnax 1.0.1 declares
# jax<0.12), the extras go in with the jax they allow and the runtime's jax is put back after them.
# SystemExit: IPython shows its message alone, with no traceback, and the cell fails, so "run all"
# stops there.
import importlib.util, os, subprocess, sys
missing = [m for m in MODULES if importlib.util.find_spec(m) is None]
if missing:
  source = os.environ.get("JAXLAB_SOURCE", "").strip() or JAXLAB_SOURCE.strip()
  if not source:
    raise SystemExit(
        f"jaxlab install: {', '.join(missing)} not importable and JAXLAB_SOURCE is not set: set it "
        f"(this cell's form field or first line, or the environment variable) to your copy of jaxlab, "
        f"e.g. \"git+https://github.com/<you>/jaxlab\", a local folder or a .whl (jaxlab installs "
        f"from a checkout today; `pip install 'jaxlab[{EXTRAS}]'` from a package index works once it "
        f"is published there)")
  if "://" not in source and not os.path.exists(source):
    raise SystemExit(f"jaxlab install: JAXLAB_SOURCE = {source!r} is neither a URL "
                     f"(git+https://...) nor an existing folder or .whl")
  package = f"{source}[{EXTRAS}]" if os.path.exists(source) else f"jaxlab[{EXTRAS}] @ {source}"
  pins = []
  if importlib.util.find_spec("jax") is not None:
    from importlib.metadata import version
    pins = [f"jax=={version('jax')}"]
  print(f"jaxlab install: {', '.join(missing)} not importable; pip install {package} {' '.join(pins)}")
  pinned = subprocess.run([sys.executable, "-m", "pip", "install", "-q", package, *pins],
                          capture_output=True, text=True)
  if pinned.returncode != 0 and not pins:
    raise SystemExit(f"jaxlab install: pip install {package} failed:\n{pinned.stderr}")
  if pinned.returncode != 0:
    print(f"jaxlab install: pip cannot keep {pins[0]} with these extras (one caps jax, as gymnax 1.0.1 "
          f"declares jax<0.12); pip install {package}, then pip install {' '.join(pins)} again")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *pins], check=True)
  importlib.invalidate_caches()  # the modules pip just wrote are found by the next cells
import jax
print(jax.devices())

# %% tags=["parameters"]
TINY = False  # the tests set True: every cell runs in seconds

# %% [markdown]
# ## The step
#
# ```python
# step = make_train_step(
#     loss_fn,                 # (params, batch, rng, extra) -> (loss, metrics); sees the global batch
#     optimizer,               # any optax transform; MoMo-style ones also get value=loss
#     state_sharding=...,      # NamedShardings of the TrainState (regex rules -> tree_shardings)
#     batch_sharding=...,      # usually over the "data" mesh axis
#     collect=None,            # (state, rng) -> (state, batch, metrics): data made on the device (RL)
#     update_extra=None,       # new_state -> extra after the update (a target network)
#     steps_per_call=1,        # a lax.scan of steps per jitted call
#     vmap_runs=False,         # a leading run axis: seeds / swept learning rates side by side
#     grad_accum_steps=1, remat="none", compute_dtype=None, skip_nonfinite=True)
# state, metrics = step(state, batch)   # jitted, state donated
# ```
#
# The trainer (`jaxlab.experiment.train(config, workdir)`) builds it from a config: the
# task (`configs/<name>.py`'s `task`) provides `loss_fn` and data, `optimizer` the transform,
# `mesh` and `sharding_rules` the shardings. Directly, on 8 devices, with MoMo on a least-squares
# problem (MoMo's step size adapts from the loss value the step passes in):

# %%
import tempfile

import jax, jax.numpy as jnp, numpy as np
import matplotlib.pyplot as plt
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxlab.config_files import load_config
from jaxlab.main import summary_table
from jaxlab.optim.momo import momo
from jaxlab.train import make_init_fn, make_mesh, make_train_step
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.experiment import run_experiments, train

print(f"{len(jax.devices())} devices: {jax.devices()[0].platform}")
mesh = make_mesh((("data", -1),))
A = jax.random.normal(jax.random.key(0), (64, 8))
batch = jax.device_put({"x": A, "y": A @ jnp.arange(8.0)}, NamedSharding(mesh, P("data")))


def loss_fn(params, batch, rng, extra):
  return jnp.mean((batch["x"] @ params["w"] - batch["y"]) ** 2), {}


optimizer = momo(learning_rate=1.0)
state = make_init_fn(lambda rng: {"w": jnp.zeros(8)}, optimizer)(jax.random.key(1))
step = make_train_step(loss_fn, optimizer, batch_sharding=NamedSharding(mesh, P("data")), steps_per_call=1)
losses = []
for _ in range(100):
  state, metrics = step(state, batch)
  losses.append(float(metrics["loss"]))
print(f"loss {losses[0]:.3g} -> {losses[-1]:.3g} in 100 steps; MoMo's step size now "
      f"{float(metrics['opt/step_size']):.3g} (learning rate 1)")
assert losses[-1] < 1e-2 * losses[0]

# %% [markdown]
# ## Each method through the step: the quickstart
#
# `configs/quickstart.py` is a suite of four experiment configs; `run_experiments` trains each
# in `workdir/<name>` and returns their summaries (what `make demo` prints). On one CPU device,
# as `make demo` runs them: about 2½ minutes in all on 2 cores, compilation and data generation
# included (`TINY`: the `:tiny` variants). DPOT's Navier-Stokes data are generated on first use
# and cached under `$JAXLAB_DATA_DIR` (default `~/.cache/jaxlab`).

# %%
if TINY:
  suite = load_config("quickstart:tiny")
  suite.experiments.dqn_softmoe = load_config("dqn_minatar:tiny")
  suite.experiments.dqn_softmoe.dqn.eval_steps = 0
  suite.experiments.dpot = load_config("dpot_pde:tiny")
  suite.experiments.dpot.data.cache_dir = tempfile.mkdtemp()   # the tests: a throwaway cache
else:
  suite = load_config("quickstart")
suite_dir = tempfile.mkdtemp()
summaries = run_experiments(suite, suite_dir, devices=jax.devices()[:1], progress=False)
print(summary_table({name: {k: v for k, v in s.items() if k not in ("mesh", "devices", "runs")}
                     for name, s in summaries.items()}))

# %%
curves = {"digits_mlp": ("loss", "MoMo: train loss"), "digits_clip": ("loss", "OT-CLIP + MoMo-Adam: train loss"),
          "dqn_softmoe": ("episode_return", "Soft-MoE DQN: episode return"), "dpot": ("loss", "DPOT: train loss")}
fig, axes = plt.subplots(1, 4, figsize=(15, 3))
for ax, (name, (key, title)) in zip(axes, curves.items()):
  rows = [r for r in read_metrics(os.path.join(suite_dir, name)) if key in r]
  ax.plot([r["step"] for r in rows], [r[key] for r in rows], marker=".")
  ax.set(title=title, xlabel="step", yscale="log" if key == "loss" else "linear")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## DPOT on an 8-device mesh
#
# The same DPOT experiment on a (data 2, model 4) mesh: the batch is split over "data", and
# `jaxlab.pde.sharding.dpot_sharding_rules` split the large kernels over "model" (block MLPs
# Megatron-style, AFNO weights by block, the time aggregation and the output deconvolution),
# optimizer moments following their parameters. The rules are regexes over state paths; we keep
# those that match this model's parameters. The step is the same program as on one device,
# partitioned by XLA, so the loss curve matches the one-device run above up to floating-point
# reduction order.

# %%
import re

from jaxlab.pde.sharding import dpot_sharding_rules
from jaxlab.tasks.pde_data import channels_of
from jaxlab.tasks.pde_model import build_model
from jaxlab.sharding import path_name

n_dev = len(jax.devices())
shape = (("data", 2), ("model", 4)) if n_dev >= 8 else (("data", n_dev), ("model", 1))


def dpot_on_mesh(config):
  """``config`` on the mesh ``shape`` with the DPOT rules that match its parameters."""
  model = build_model(config, channels_of(config))
  x = jnp.zeros((1, config.data.resolution, config.data.resolution, config.t_in, channels_of(config)))
  names = [path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(
      {"params": jax.eval_shape(model.init, jax.random.key(0), x)["params"]})[0]]
  config.mesh = shape
  config.sharding_rules = tuple(r for r in dpot_sharding_rules() if any(re.search(r[0], n) for n in names))
  return config


dpot = dpot_on_mesh(suite.experiments.dpot.copy_and_resolve_references())
mesh_dir = tempfile.mkdtemp()
meshed = train(dpot, mesh_dir, progress=False)
print("rules used:", [r[0] for r in dpot.sharding_rules])
{k: meshed.summary[k] for k in ("mesh", "parameters", "state_MiB_per_device", "replicated_MiB", "steps_per_sec")
 if k in meshed.summary} | {k: v for k, v in meshed.summary.items() if k.startswith("l2re")}

# %%
one = [r for r in read_metrics(os.path.join(suite_dir, "dpot")) if "loss" in r]
eight = [r for r in read_metrics(mesh_dir) if "loss" in r]
params = meshed.state.params
leaves = jax.tree_util.tree_flatten_with_path(params)[0]
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 3.5), gridspec_kw={"width_ratios": [1, 1.6]})
ax0.plot([r["step"] for r in one], [r["loss"] for r in one], marker="o", label="1 device")
ax0.plot([r["step"] for r in eight], [r["loss"] for r in eight], marker="x", ls="--", label=f"mesh {dict(shape)}")
ax0.set(xlabel="step", ylabel="train loss", yscale="log", title="DPOT: same step, two meshes"); ax0.legend()
names = [path_name(p).replace("params/", "") for p, _ in leaves]
full = [leaf.size for _, leaf in leaves]
shard = [leaf.addressable_shards[0].data.size for _, leaf in leaves]
order = np.argsort(full)[::-1][:12]
ax1.barh([names[i] for i in order], [full[i] for i in order], color="lightgray", label="whole parameter")
ax1.barh([names[i] for i in order], [shard[i] for i in order], color="tab:blue", label="held by one device")
ax1.invert_yaxis(); ax1.set(xlabel="elements", title="largest parameters and their shard per device")
ax1.tick_params(axis="y", labelsize=7); ax1.legend(fontsize=8)
plt.tight_layout()
plt.show()
print(f"parameters held by one device: {sum(shard) / sum(full):.0%} of {sum(full):,}; "
      f"largest loss difference 1 device vs mesh: "
      f"{max(abs(a['loss'] - b['loss']) / a['loss'] for a, b in zip(one, eight)):.2e} (relative)")

# %% [markdown]
# ## DPOT + Soft-MoE + MoMo-Adam on a (data x model x expert) mesh
#
# Three methods in one model: each DPOT block's channel MLP is a Soft-MoE layer over the block's
# latent pixels (`model.mlp = "softmoe"`; each expert has the dense MLP's hidden width), trained
# with MoMo-Adam (`configs/dpot_moe.py`). The experts' stacked leading axis is sharded over an
# `"expert"` mesh axis, and inside each expert the MLP is split over `"model"` as the dense one is
# (`jaxlab.pde.sharding.dpot_layout_rules`). The same config runs data-parallel over the 8 CPU
# devices and on a (data 2, model 2, expert 2) mesh; the losses agree up to reduction order (the
# tests check a 3-axis run against a 1-device run).

# %%
moe_config = load_config("dpot_moe:tiny")
moe_config.num_steps = 20 if TINY else 100
moe_config.log_every = moe_config.eval_every = moe_config.checkpoint_every = moe_config.num_steps // 5
moe_one = train(moe_config, tempfile.mkdtemp(), progress=False)
if n_dev >= 8:
  moe_config.mesh = (("data", 2), ("model", 2), ("expert", 2))
  moe_mesh_dir = tempfile.mkdtemp()
  moe_mesh = train(moe_config, moe_mesh_dir, progress=False)
  w1 = moe_mesh.state.params["blocks_0"]["mlp"]["experts"]["w1"]
  print("expert w1", w1.shape, "sharded as", w1.sharding.spec, "-> each device holds", w1.addressable_shards[0].data.shape)
  print("final loss, data-parallel vs 3-axis mesh:", moe_one.summary["final_loss"], moe_mesh.summary["final_loss"])
print(summary_table({"dpot": meshed.summary, "dpot_softmoe_momo_adam": moe_one.summary}))
