# %% [markdown]
# # Soft MoE in a DQN value network, on MinAtar, on CPU
#
# Obando-Ceron, Sokar, Willi, Lyle, Farebrother, Foerster, Dziugaite, Precup, Castro,
# *Mixtures of Experts Unlock Parameter Scaling for Deep RL* (ICML 2024): replacing the
# penultimate dense layer of a value network by a Soft MoE (Puigcerver, Riquelme, Mustafa,
# Houlsby, *From Sparse to Soft Mixtures of Experts*, ICLR 2024) lets DQN's performance grow
# with the number of experts. This notebook writes the layer out, checks jaxlab's fast kernel
# against the formulas, trains a Soft-MoE DQN on MinAtar Breakout through jaxlab's one train
# step (environments, replay buffer and updates all inside one jitted program), and looks at
# the dispatch and combine weights on MinAtar tokens. Nothing is downloaded.

# %%
# this notebook's jaxlab extras (setup.cfg) and the modules it imports, itself or via jaxlab
EXTRAS = "rl,notebooks"
MODULES = ["jaxlab", "matplotlib", "gymnax", "flashbax"]
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
# ## The Soft MoE layer
#
# A sample's m tokens X ∈ ℝ^{m×d} are routed to n experts with p slots each (s = n·p slots) by
# one learned matrix Φ ∈ ℝ^{d×s} (Puigcerver et al. Sec. 2.1, Eqs. 1–3). The logits are
#
# $$L = X\Phi \in \mathbb R^{m\times s}.$$
#
# **Dispatch**: each slot takes a convex combination of all tokens, a softmax over the tokens
# (the columns of L):
#
# $$D_{ij} = \frac{e^{L_{ij}}}{\sum_{i'=1}^{m} e^{L_{i'j}}}, \qquad \tilde X = D^\top X \in \mathbb R^{s\times d}.$$
#
# **Experts**: expert e (an MLP d → h → d with ReLU) processes its own p slots,
# $\tilde Y_{j} = f_{\lfloor j/p \rfloor}(\tilde X_{j})$.
#
# **Combine**: each token's output is a convex combination of all slot outputs, a softmax over
# experts × slots jointly (the rows of L):
#
# $$C_{ij} = \frac{e^{L_{ij}}}{\sum_{j'=1}^{s} e^{L_{ij'}}}, \qquad Y = C\,\tilde Y \in \mathbb R^{m\times d}.$$
#
# Every token reaches every expert with a continuous weight: no top-k, no dropped tokens, no
# load-balancing loss, and the layer is differentiable everywhere. Its cost is set by the slots,
# not by the experts' count: with s fixed, more experts means fewer slots each.
#
# In the RL paper (Sec. 3, Fig. 3) the tokens are the encoder's output "per convolution": for
# MinAtar's 10 × 10 grids a 3 × 3 convolution with 16 channels gives m = 100 tokens of d = 16.
# The layer's outputs are flattened and fed to the Q-value head; dopamine's default is one slot
# per token (capacity factor 1: p = ⌈m/n⌉).
#
# `jaxlab.moe.soft_moe` computes this on CPU with a kernel that has a hand-written backward pass
# and on GPU/TPU with the einsum form (`impl="auto"`, chosen per platform when the program is
# lowered); `soft_moe_einsum` is the readable version. Below, both and the three equations written
# with numpy give the same outputs.

# %%
import tempfile

import jax, jax.numpy as jnp, numpy as np
import matplotlib.pyplot as plt

from jaxlab.config_files import load_config
from jaxlab.moe import experts as experts_lib
from jaxlab.moe import init_soft_moe, num_slots, soft_moe, soft_moe_einsum
from jaxlab.rl.envs import make_env
from jaxlab.rl.networks import QNetwork
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.experiment import train

m, d, n, h = 100, 16, 4, 64
p = num_slots(m, n)                                           # ceil(100 / 4) = 25 slots per expert
params = init_soft_moe(jax.random.key(0), d, n, p, h)
x = jax.random.normal(jax.random.key(1), (2, m, d))          # 2 samples, each its own routing group


def soft_moe_numpy(params, x):
  """Eqs. 1-3 for one sample x [m, d]."""
  phi = np.asarray(params["router"]["phi"]).reshape(d, n * p)
  L = x @ phi                                                  # [m, s]
  D = np.exp(L - L.max(0)); D /= D.sum(0)                      # softmax over tokens
  C = np.exp(L - L.max(1, keepdims=True)); C /= C.sum(1, keepdims=True)   # over experts x slots
  slots = (D.T @ x).reshape(n, p, d)                           # X~ = D^T X, p slots per expert
  outs = np.asarray(experts_lib.apply_experts(params["experts"], jnp.asarray(slots)))
  return C @ outs.reshape(n * p, d)                            # Y = C Y~


y_kernel, stats = jax.jit(soft_moe)(params, x)
y_einsum = jax.jit(soft_moe_einsum)(params, x)
y_numpy = np.stack([soft_moe_numpy(params, np.asarray(xi, np.float64)) for xi in x])
np.testing.assert_allclose(y_kernel, y_einsum, rtol=1e-4, atol=1e-5)
np.testing.assert_allclose(y_kernel, y_numpy, rtol=1e-4, atol=1e-5)
print(f"m={m} tokens, n={n} experts x p={p} slots; outputs {y_kernel.shape}, max |kernel - numpy| = "
      f"{np.abs(np.asarray(y_kernel) - y_numpy).max():.1e}")
{k: np.round(np.asarray(v), 4).tolist() for k, v in stats.items()}

# %% [markdown]
# ## MinAtar Breakout, the tokens' source
#
# MinAtar games are 10 × 10 grids with one boolean channel per object (Breakout: paddle, ball,
# trail, bricks). jaxlab runs them with gymnax, with MinAtar's sticky actions (p = 0.1) and all
# 6 actions as in Dopamine. A few frames of random play:

# %%
env = make_env("breakout")


@jax.jit
def random_play(key):
  """12 frames of uniformly random actions in 8 environments -> observations [12, 8, 10, 10, 4]."""
  env_state, obs = env.reset(key, 8)

  def step(env_state, k):
    k_act, k_env = jax.random.split(k)
    env_state, obs, *_ = env.step(env_state, jax.random.randint(k_act, (8,), 0, env.num_actions), k_env)
    return env_state, obs

  return jax.lax.scan(step, env_state, jax.random.split(key, 12))[1]


frames = np.asarray(random_play(jax.random.key(2)))
colours = np.array([[0.2, 0.4, 1.0], [1.0, 0.2, 0.2], [1.0, 0.7, 0.7], [0.3, 0.8, 0.3]])


def picture(o):
  """RGB image of a [10, 10, 4] Breakout observation (paddle blue, ball red, trail pink, bricks green)."""
  rgb = np.ones((10, 10, 3))
  for c in range(3, -1, -1):
    rgb[o[..., c]] = colours[c]
  return rgb


fig, axes = plt.subplots(1, 6, figsize=(10, 2))
for ax, t in zip(axes, range(0, 12, 2)):
  ax.imshow(picture(frames[t, 0])); ax.set_title(f"frame {t + 1}", fontsize=9); ax.axis("off")
plt.show()
print("observations", frames.shape, frames.dtype, "-> per frame 10 x 10 = 100 tokens of 16 conv channels")

# %% [markdown]
# ## Training a Soft-MoE DQN through the one train step
#
# `configs/dqn_minatar.py` is Dopamine's MinAtar DQN (Adam 2.5·10⁻⁴, MSE TD loss, target sync
# every 1000 frames, 1000 frames of random play first) with a Soft-MoE penultimate layer. Each
# train step acts 4 frames ε-greedily in the environment, adds them to a flashbax replay buffer,
# samples a batch and takes one TD update, all inside `jaxlab.train.make_train_step` (the task's
# `collect`), 250 steps per jitted call. The `:demo` size (4 experts with 64 hidden units) is
# the quickstart's; here it runs 24k frames (about 3 minutes on a loaded 2-core CPU). That is
# a smoke run: Dopamine trains MinAtar agents for 10M frames, and over 24k frames the returns
# barely leave random play's.

# %%
config = load_config("dqn_minatar:tiny" if TINY else "dqn_minatar:demo")
if not TINY:
  config.num_steps = 6000                                      # x 4 frames = 24k frames
  config.dqn.epsilon_decay_frames = 10_000
  config.log_every, config.eval_every, config.checkpoint_every = 250, 3000, 6000
if TINY:
  config.dqn.eval_steps = 0                                    # the tests: no evaluation program
workdir = tempfile.mkdtemp()
result = train(config, workdir, devices=jax.devices()[:1], progress=False)   # one run, one device
{k: v for k, v in result.summary.items() if k in ("task", "parameters", "steps", "frames_per_sec", "eval_return",
                                                  "eval_episodes", "wall_time_s")}

# %% [markdown]
# ## Learning curves from `metrics.jsonl`
#
# `episode_return` is the mean return of the last 100 completed training episodes (ε-greedy);
# the routing statistics come from the layer itself: entropies of the dispatch weights (each
# slot over the tokens) and combine weights (each token over the slots), divided by their
# maximum, so 1 means uniform.

# %%
rows = [r for r in read_metrics(workdir) if "loss" in r]
frames_seen = [r["frames"] for r in rows]
fig, axes = plt.subplots(1, 3, figsize=(12, 3))
axes[0].plot(frames_seen, [r["episode_return"] for r in rows], marker=".")
axes[0].set(xlabel="frames", ylabel="episode return (last 100)", title="Breakout, Soft-MoE DQN")
axes[1].plot(frames_seen, [r["loss"] for r in rows], marker=".", label="TD loss")
axes[1].plot(frames_seen, [r["epsilon"] for r in rows], marker=".", label="epsilon")
axes[1].set(xlabel="frames", yscale="log"); axes[1].legend()
axes[2].plot(frames_seen, [r["moe/dispatch_entropy"] for r in rows], marker=".", label="dispatch")
axes[2].plot(frames_seen, [r["moe/combine_entropy"] for r in rows], marker=".", label="combine")
axes[2].set(xlabel="frames", ylabel="entropy / max", title="routing"); axes[2].legend()
plt.tight_layout()
plt.show()
assert rows[-1]["step"] == config.num_steps

# %% [markdown]
# ## Dispatch and combine weights on MinAtar tokens
#
# The same Q-network, initialised and trained, on one Breakout observation: the encoder's 100
# tokens give logits L = XΦ, hence D (100 tokens × s slots, each column sums to 1) and C
# (each row sums to 1), shown relative to uniform (m·D and s·C: 1 = uniform). Slots are
# grouped by expert. Both are soft, within tens of percent of uniform, at initialisation and
# after this short run (the routing entropies above stay near 1): the conv features are small,
# so the logits are. What varies follows the tokens: the rows (grid positions) holding objects
# (bricks in the top rows, the ball and its trail, the paddle) get their own weights, and one
# slot's dispatch weights over the 10 × 10 grid pick out those objects.

# %%
net = QNetwork(num_actions=env.num_actions, **dict(config.network))
sample = jnp.asarray(frames[-1, :1], jnp.float32)              # one observation [1, 10, 10, 4]


@jax.jit
def routing(params, obs):
  """(dispatch [m, s], combine [m, s]) of the Soft MoE layer on obs [1, 10, 10, C]."""
  _, inter = net.apply({"params": params}, obs, capture_intermediates=True, mutable=["intermediates"])
  features = inter["intermediates"]["MinAtarEncoder_0"]["__call__"][0]     # [1, 10, 10, d]
  tokens = features.reshape(-1, features.shape[-1])                           # per-conv tokens [m, d]
  phi = params["SoftMoE_0"]["router"]["phi"]
  logits = tokens @ phi.reshape(phi.shape[0], -1)
  return jax.nn.softmax(logits, axis=0), jax.nn.softmax(logits, axis=1)


init_params = jax.jit(net.init)(jax.random.key(config.seed), sample)["params"]
n_exp = config.network.num_experts
fig, axes = plt.subplots(2, 2, figsize=(10, 8))
for col, (label, prm) in enumerate([("initialised", init_params), ("trained", result.state.params)]):
  D, C = map(np.asarray, routing(prm, sample))
  s = D.shape[1]
  for row, (w, name) in enumerate([(D * D.shape[0], "m·D, dispatch (softmax over tokens)"),
                                    (C * s, "s·C, combine (softmax over slots)")]):
    im = axes[row, col].imshow(w, aspect="auto", cmap="RdBu_r", vmin=0.5, vmax=1.5, interpolation="nearest")
    for e in range(1, n_exp):
      axes[row, col].axvline(e * s / n_exp - 0.5, color="k", lw=0.8)
    axes[row, col].set(title=f"{label}: {name}", xlabel=f"slot ({n_exp} experts x {s // n_exp})", ylabel="token")
    fig.colorbar(im, ax=axes[row, col])
plt.tight_layout()
plt.show()

D, C = map(np.asarray, routing(result.state.params, sample))
s = D.shape[1]
first_slots = [e * (s // n_exp) for e in range(n_exp)]
fig, axes = plt.subplots(1, n_exp + 1, figsize=(2.3 * (n_exp + 1), 2.5))
axes[0].imshow(picture(frames[-1, 0])); axes[0].set_title("observation", fontsize=9)
for ax, j in zip(axes[1:], first_slots):
  ax.imshow(D[:, j].reshape(10, 10) * D.shape[0], cmap="RdBu_r", vmin=0.5, vmax=1.5)
  ax.set_title(f"expert {j // (s // n_exp)}, slot 0", fontsize=9)
for ax in axes:
  ax.axis("off")
fig.suptitle("trained dispatch weights m·D of one slot per expert over the 10 x 10 token grid (1 = uniform)",
             fontsize=10)
plt.show()
print(f"largest dispatch weight {D.max():.3f} (uniform: {1 / D.shape[0]:.3f}); "
      f"largest combine weight {C.max():.3f} (uniform: {1 / s:.3f})")
