"""Writes tests/data/momo_reference.npz: trajectories of the official MoMo / MoMo-Adam code.

Runs the authors' PyTorch implementation (PyPI ``momo-opt`` 0.1.0, identical to
github.com/fabian-sp/MoMo at 7be52f2) in float64 on a tiny tanh MLP with noisy labels, so the
minimal loss is well above 0 and the online lower bound (``use_fstar``) has work to do. Only
numbers are saved, never their code. Needs torch + momo-opt, which jaxlab does not depend on:

  python3 -m venv /tmp/momoref
  /tmp/momoref/bin/pip install torch==2.13.0 numpy momo-opt==0.1.0
  /tmp/momoref/bin/python scripts/make_momo_fixture.py

The step size tau_k is not exposed by the official code; it is recovered exactly from the
update, e.g. tau = <x_k - (1 + lr wd) x_{k+1}, d_k> / ||d_k||^2 for MoMo.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import torch
from momo import Momo, MomoAdam

N, DIM, HIDDEN, CLASSES, BATCH, STEPS = 64, 5, 6, 3, 16, 50
OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "momo_reference.npz"

# name -> (class, official kwargs). The test maps these to jaxlab arguments itself.
CONFIGS = {
    "momo": (Momo, dict(lr=5.0)),
    "momo_wd": (Momo, dict(lr=5.0, weight_decay=0.05)),
    "momo_bc": (Momo, dict(lr=5.0, bias_correction=True)),
    "momo_bc_wd_lb": (Momo, dict(lr=5.0, bias_correction=True, weight_decay=0.05, lb=0.2)),
    "momo_fstar": (Momo, dict(lr=5.0, use_fstar=True)),
    "momo_fstar_bc_wd": (Momo, dict(lr=5.0, use_fstar=True, bias_correction=True,
                                    weight_decay=0.05)),
    "momo_adam": (MomoAdam, dict(lr=1.0)),
    "momo_adam_wd_divide": (MomoAdam, dict(lr=1.0, weight_decay=0.05)),
    "momo_adam_wd_adamw": (MomoAdam, dict(lr=1.0, weight_decay=0.05, divide=False)),
    "momo_adam_fstar": (MomoAdam, dict(lr=1.0, use_fstar=True)),
    "momo_adam_fstar_wd": (MomoAdam, dict(lr=1.0, use_fstar=True, weight_decay=0.05)),
}


def make_problem(seed: int = 0) -> dict[str, np.ndarray]:
  rs = np.random.RandomState(seed)
  x = rs.randn(N, DIM)
  y = np.argmax(x @ rs.randn(DIM, CLASSES), axis=1)
  flip = rs.rand(N) < 0.25  # label noise: the minimal loss is well above zero.
  y[flip] = rs.randint(0, CLASSES, flip.sum())
  return dict(
      x=x.astype(np.float32), y=y.astype(np.int32),
      batches=np.stack([rs.choice(N, BATCH, replace=False) for _ in range(STEPS)]).astype(np.int32),
      w1=(rs.randn(DIM, HIDDEN) / np.sqrt(DIM)).astype(np.float32),
      b1=np.zeros(HIDDEN, np.float32),
      w2=(rs.randn(HIDDEN, CLASSES) / np.sqrt(HIDDEN)).astype(np.float32),
      b2=np.zeros(CLASSES, np.float32),
  )


def loss_fn(params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
  w1, b1, w2, b2 = params
  logits = torch.tanh(x @ w1 + b1) @ w2 + b2
  return torch.nn.functional.cross_entropy(logits, y)


def flat(tensors: list[torch.Tensor]) -> torch.Tensor:
  return torch.cat([t.reshape(-1) for t in tensors])


def recover_tau(cls, kw, opt, params, x_prev: torch.Tensor) -> float:
  """Solves the official update for tau, given the optimizer's state after the step."""
  lr, wd = kw["lr"], kw.get("weight_decay", 0.0)
  d = flat([opt.state[p]["grad_avg"] for p in params])
  x_new = flat(params).detach()
  if cls is Momo:
    direction, moved = d, x_prev - (1 + lr * wd) * x_new
  else:
    b2, eps = 0.999, 1e-8
    step = opt.state[params[0]]["step"]
    v = flat([opt.state[p]["grad_avg_sq"] for p in params])
    direction = d / ((v / (1 - b2**step)).sqrt() + eps)
    if kw.get("divide", True):
      moved = x_prev - (1 + lr * wd) * x_new
    else:
      moved = (1 - lr * wd) * x_prev - x_new
  return float(moved @ direction / (direction @ direction))


def run(cls, kw, prob) -> dict[str, np.ndarray]:
  params = [torch.tensor(prob[k], dtype=torch.float64, requires_grad=True)
            for k in ("w1", "b1", "w2", "b2")]
  x_all = torch.tensor(prob["x"], dtype=torch.float64)
  y_all = torch.tensor(prob["y"], dtype=torch.int64)
  opt = cls(params, **kw)
  traj, taus, lbs, losses = [flat(params).detach().numpy().copy()], [], [], []
  for idx in prob["batches"]:
    idx = torch.tensor(idx, dtype=torch.int64)
    opt.zero_grad()
    loss = loss_fn(params, x_all[idx], y_all[idx])
    loss.backward()
    x_prev = flat(params).detach().clone()
    opt.step(loss=loss)
    taus.append(recover_tau(cls, kw, opt, params, x_prev))
    lbs.append(float(opt.state["fstar"]) if kw.get("use_fstar") else float(kw.get("lb", 0.0)))
    losses.append(loss.item())
    traj.append(flat(params).detach().numpy().copy())
  return dict(params=np.stack(traj).astype(np.float32), tau=np.array(taus),
              lb=np.array(lbs), loss=np.array(losses))


def main() -> None:
  # The official code creates some accumulators (gamma) with the default dtype: make it f64 too.
  torch.set_default_dtype(torch.float64)
  prob = make_problem()
  arrays = {f"problem/{k}": v for k, v in prob.items()}
  meta = {}
  for name, (cls, kw) in CONFIGS.items():
    res = run(cls, kw, prob)
    arrays.update({f"{name}/{k}": v for k, v in res.items()})
    meta[name] = dict(optimizer=cls.__name__, kwargs=kw)
    rho = 1 - 0.9 ** np.arange(1, STEPS + 1) if (cls is MomoAdam or kw.get("bias_correction")) \
        else np.ones(STEPS)
    capped = np.isclose(res["tau"], kw["lr"] / rho, rtol=1e-9)
    print(f"{name:22s} loss {res['loss'][0]:.3f}->{res['loss'][-1]:.3f} capped steps "
          f"{capped.sum():2d}/{STEPS} lb_end {res['lb'][-1]:.4f}")
  arrays["meta"] = np.array(json.dumps(dict(
      configs=meta, source="momo-opt 0.1.0 (== fabian-sp/MoMo@7be52f2)",
      torch=torch.__version__, dtype="float64")))
  OUT.parent.mkdir(parents=True, exist_ok=True)
  np.savez_compressed(OUT, **arrays)
  print(f"wrote {OUT} ({OUT.stat().st_size / 1024:.1f} KiB)")


if __name__ == "__main__":
  main()
