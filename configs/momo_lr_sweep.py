r"""Learning-rate sweep of MoMo / MoMo-Adam against their baselines (the MoMo page's study).

One learning rate per decade, several seeds, vmapped over both; scikit-learn's digits (no
download). Run::

  nice -n 5 python benchmarks/momo_lr_sweep.py --config=configs/momo_lr_sweep.py

Small variant (seconds; a smoke test of the whole pipeline)::

  python benchmarks/momo_lr_sweep.py --config=configs/momo_lr_sweep.py:small \
      --config.out_dir=/tmp/momo_sweep_small
"""

import ml_collections

# SGD-M runs on MoMo's learning-rate axis: sgd(lr * (1 - beta), momentum=beta).
_MAIN = ("sgdm", "momo", "adam", "momo_adam", "polyak_sgd", "prodigy", "dadapt_adamw")
_LOWER_BOUND = ("sgdm", "momo", "momo_adapt", "adam", "momo_adam", "momo_adam_adapt")


def _method(optimizer: str, lr_arg: str = "learning_rate", **kwargs) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({"optimizer": optimizer, "lr_arg": lr_arg, "kwargs": kwargs})


def _problem(model: str, model_kwargs: dict, steps: int, batch_size: int,
             methods: tuple[str, ...], label_noise: float = 0.0) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({
      "model": model, "model_kwargs": model_kwargs, "steps": steps, "batch_size": batch_size,
      "label_noise": label_noise, "methods": methods,
      # vmapping convs over their weights is ~20x slower on CPU: run CNNs one after another.
      "vmap_runs": model != "small_cnn"})


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: ``None`` (the study) or ``"small"`` (2 seeds, 3 learning rates, 20 steps)."""
  if arg not in (None, "", "small"):
    raise ValueError(f"configs/momo_lr_sweep.py takes no argument or 'small', got {arg!r}")
  c = ml_collections.ConfigDict()
  c.out_dir = "benchmarks/results/momo"
  c.seeds = 3
  c.lrs = tuple(10.0**e for e in range(-6, 4))  # 10 decades, the same grid for every method
  c.test_fraction = 0.2
  c.split_seed = 0
  c.tolerance = 1.0  # accuracy points: "within 1 point of the method's own best"
  c.methods = ml_collections.ConfigDict({
      "sgdm": _method("sgdm", beta=0.9),
      "momo": _method("momo"),
      "momo_adapt": _method("momo", adapt_lower_bound=True),
      "adam": _method("adam"),
      "momo_adam": _method("momo_adam"),
      "momo_adam_adapt": _method("momo_adam", adapt_lower_bound=True),
      "polyak_sgd": _method("polyak_sgd", lr_arg="max_learning_rate"),
      "prodigy": _method("prodigy"),
      "dadapt_adamw": _method("dadapt_adamw"),
  })
  c.problems = ml_collections.ConfigDict({
      "digits_mlp": _problem("mlp", {"hidden": (64,)}, 400, 128, _MAIN),
      "digits_cnn": _problem("small_cnn", {"features": (16, 32), "hidden": 64}, 250, 64, _MAIN),
      # 30% of training labels resampled uniformly: the minimal training loss is far above 0.
      "digits_mlp_noisy": _problem("mlp", {"hidden": (64,)}, 400, 128, _LOWER_BOUND,
                                   label_noise=0.3),
  })
  if arg == "small":
    c.seeds = 2
    c.lrs = (1e-2, 1.0, 1e2)
    for p in c.problems.values():
      p.steps = 20
  return c
