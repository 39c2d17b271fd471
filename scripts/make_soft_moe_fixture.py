"""Writes tests/data/soft_moe_reference.npz: outputs and gradients of dopamine's MoE layers.

Runs the authors' code (google/dopamine ``dopamine/labs/moes/architectures``: ``softmoe.SoftMoE``,
``moe.MoE`` with ``routers.TopKRouter``, ``networks.ExpertModel`` and ``networks.NatureDQNMoE``)
from a checkout OUTSIDE this repository and saves only numbers (parameters, inputs, outputs,
gradients), never code. Each sample is fed to the layer on its own and the batch is vmapped,
as dopamine's agents do. Needs gin-config (which jaxlab does not depend on), e.g.:

  git clone https://github.com/google/dopamine /work/ext/dopamine   # or any checkout
  pip install --target /work/ext/pylib gin-config
  PYTHONPATH=/work/ext/pylib .venv/bin/python scripts/make_soft_moe_fixture.py /work/ext/dopamine

``dopamine.jax.networks`` (imported by networks.py for noisy nets and Atari preprocessing, and
pulling in gym/ALE/TF-probability) is replaced by an empty stub: the layers used here
(non-noisy experts, ``inputs_preprocessed=True``) never touch it.
"""

from __future__ import annotations

import pathlib
import sys
import types

import numpy as np

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "soft_moe_reference.npz"


def _import_dopamine(path: str):
  sys.path.insert(0, path)
  stub = types.ModuleType("dopamine.jax.networks")
  sys.modules.setdefault("dopamine.jax", types.ModuleType("dopamine.jax")).networks = stub
  sys.modules["dopamine.jax.networks"] = stub
  from dopamine.labs.moes.architectures import moe, networks, softmoe  # noqa: E402
  return moe, networks, softmoe


def _flat(prefix: str, tree, out: dict) -> None:
  if isinstance(tree, dict):
    for k, v in tree.items():
      _flat(f"{prefix}/{k}", v, out)
  else:
    out[prefix] = np.asarray(tree)


def main(dopamine_path: str) -> None:
  import jax
  import jax.numpy as jnp
  moe, networks, softmoe = _import_dopamine(dopamine_path)
  rng = np.random.RandomState(0)
  data: dict[str, np.ndarray] = {}

  def run_layer(name, module, x, key):
    """Output and gradients of <out, cotangent> w.r.t. params and x, per-sample vmapped."""
    params = module.init(jax.random.key(key), x[0], key=jax.random.key(1))
    # Perturb biases and scale away from their (zero / one) inits so the test can see them.
    params = jax.tree_util.tree_map_with_path(
        lambda p, v: v + 0.1 * jax.random.normal(jax.random.key(7), v.shape)
        if any(getattr(k, "key", "") in ("bias", "scalar") for k in p) else v, params)
    apply = lambda prm, xs: jax.vmap(
        lambda xi: module.apply(prm, xi, key=jax.random.key(1)).values)(xs)
    y = apply(params, x)
    cot = jnp.asarray(rng.randn(*y.shape).astype(np.float32))
    g_params, g_x = jax.grad(lambda prm, xs: jnp.sum(apply(prm, xs) * cot), argnums=(0, 1))(
        params, x)
    data[f"{name}/x"], data[f"{name}/y"] = np.asarray(x), np.asarray(y)
    data[f"{name}/cotangent"], data[f"{name}/grad_x"] = np.asarray(cot), np.asarray(g_x)
    _flat(f"{name}/params", params["params"], data)
    _flat(f"{name}/grads", g_params["params"], data)

  expert = lambda h: networks.ExpertModel(expert_hidden_size=h, rng_key=jax.random.key(0))
  x = jnp.asarray(rng.randn(3, 10, 6).astype(np.float32))  # 3 samples, 10 tokens of dim 6
  run_layer("soft", softmoe.SoftMoE(module=expert(8), num_experts=4), x, 10)  # p = 3
  run_layer("soft_normalized", softmoe.SoftMoE(module=expert(8), num_experts=4,
                                                normalization=True), x, 11)
  run_layer("soft_capacity2", softmoe.SoftMoE(module=expert(5), num_experts=3,
                                               capacity_factor=2.0), x, 12)  # p = 7
  run_layer("top1", moe.MoE(module=expert(8), num_experts=4, num_selected_experts=1), x, 13)

  # The whole Nature-DQN Soft-MoE network (per-conv tokens) on two random frames; frames are
  # stored as uint8 and fed as frame / 255, dopamine's Atari preprocessing.
  frames = rng.randint(0, 256, size=(2, 84, 84, 4)).astype(np.uint8)
  obs = jnp.asarray(frames, jnp.float32) / 255.0
  net = networks.NatureDQNMoE(num_actions=6, inputs_preprocessed=True, expert_hidden_units=16,
                              num_experts=4, moe_type="SOFTMOE", routing_type="PER_PIXEL")
  params = net.init(jax.random.key(3), obs[0], key=jax.random.key(1))
  q = jax.vmap(lambda o: net.apply(params, o, key=jax.random.key(1)).q_values)(obs)
  data["net_softmoe/frames"], data["net_softmoe/q"] = frames, np.asarray(q)
  _flat("net_softmoe/params", params["params"], data)

  OUT.parent.mkdir(parents=True, exist_ok=True)
  np.savez_compressed(OUT, **data)
  print(f"wrote {OUT} ({OUT.stat().st_size / 1024:.0f} KiB, {len(data)} arrays)")
  for k in sorted(data):
    if "/params/" in k or "/grads/" in k:
      print(f"  {k}: {data[k].shape}")


if __name__ == "__main__":
  if len(sys.argv) != 2:
    sys.exit("usage: make_soft_moe_fixture.py /path/to/dopamine-checkout")
  main(sys.argv[1])
