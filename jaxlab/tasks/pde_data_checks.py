"""The checks of a PDE operator-learning config's ``data`` block and window, before any data are made.

Every bad setting of ``t_in``, ``t_out`` and ``data.*`` is one line naming the key, raised before
any data set is generated or read beyond its file headers (:func:`check_data_config`).
"""

from __future__ import annotations

from typing import Sequence

import ml_collections
import numpy as np

from jaxlab.errors import check, check_int, is_int, is_real
from jaxlab.pde.data import MIXTURE_RULES, DatasetSpec
from jaxlab.tasks.pde_data import channels_of, data_source, file_sets, pad_value, served_sets
from jaxlab.pde.data.loader import default_num_test


def check_window_keys(config: ml_collections.ConfigDict) -> None:
  """``t_in``, ``t_out`` and ``data.rollout_steps`` are ints in range (one line naming the key)."""
  t_in, t_out, steps = config.t_in, config.t_out, config.data.rollout_steps
  for key, value in (("t_in", t_in), ("t_out", t_out)):
    check_int(value, key, 1)
  check_int(steps, "data.rollout_steps", 0, "0: each set's t_test")


def check_sets(config: ml_collections.ConfigDict) -> tuple[list[DatasetSpec], list[int]]:
  """``(generated specs, channels of every set)``, the windows checked against every set's frames.

  Generated sets: :func:`jaxlab.tasks.pde_data.served_sets` and the test split; files (``data.source="files"``):
  :func:`jaxlab.pde.data.files.file_sets` opens the table's files (headers only) and checks
  t_in + t_out, t_in + t_test, data.eval_trajectories and data.num_channels against each.
  """
  check_window_keys(config)
  if data_source(config) == "files":
    from jaxlab.pde.data.files.configured import check_file_keys  # noqa: PLC0415 - h5py only for files
    check_file_keys(config.data)
    return [], [s.dataset.num_channels for s in file_sets(config)]
  specs = [s.spec for s in served_sets(config)]  # checks t_in + t_out and t_in + t_test
  check_test_split(config, specs)
  return specs, [s.num_channels for s in specs]


def check_test_split(config: ml_collections.ConfigDict, specs: Sequence[DatasetSpec]) -> None:
  """data.num_test leaves training and test trajectories in every set; data.eval_trajectories fits in it."""
  d = config.data
  num_test, evals = d.get("num_test", None), d.get("eval_trajectories", 0)
  check(num_test is None or (is_int(num_test) and num_test >= 1),
        f"data.num_test={num_test!r} must be an int >= 1 (test trajectories per set, rolled out at evaluation) "
        "or None (10% of each set)")
  for i, spec in enumerate(specs):
    n = spec.num_trajectories
    where = f"data set {spec.name!r} (data.sets[{i}].trajectories={n})"
    check(n >= 2, f"{where} is too small; the train/test split needs >= 2 trajectories")
    test = default_num_test(n) if num_test is None else num_test
    check(test < n, f"data.num_test={num_test} leaves no training trajectory in {where}; must be in [1, {n - 1}]")
  check_int(evals, "data.eval_trajectories", 0, "test trajectories rolled out per set at evaluation; 0: all")
  check(num_test is None or evals <= num_test, f"data.eval_trajectories={evals} exceeds data.num_test={num_test}; "
        f"must be in [0, {num_test}] (0: all)")


def check_data_config(config: ml_collections.ConfigDict) -> tuple[list[DatasetSpec], int]:
  """``(data set specs, channels)`` after checking every ``data.*`` key and the window against every set.

  Nothing is generated or read beyond file headers.

  Args:
    config: a PDE operator-learning config (``t_in``, ``t_out``, ``data``).

  Returns:
    The generated sets' specs ([] for ``data.source="files"``) and the model's channel count.

  Raises:
    InputError: the first bad setting, one line naming its key.
  """
  res = config.data.resolution
  check(is_int(res) and res >= 8 and res % 2 == 0,
        f"data.resolution={res!r} must be an even int >= 8 (grid points per axis)")
  specs, set_channels = check_sets(config)
  widest = max(set_channels)
  num_channels = config.data.get("num_channels", 0)
  check(is_int(num_channels), f"data.num_channels={num_channels!r} must be an int (0: the widest set's {widest})")
  check(num_channels == 0 or num_channels >= widest,
        f"data.num_channels={num_channels!r} is below the widest data set's {widest} channels; must be 0 (the "
        f"widest set's) or an int >= {widest} (more pads, see data.channel_padding)")
  channels = channels_of(config)
  weights = tuple(config.data.weights)
  check(not weights or len(weights) == len(set_channels),
        f"data.weights has {len(weights)} entries for {len(set_channels)} data sets (or give () for equal weights)")
  for i, w in enumerate(weights):
    check(is_real(w) and np.isfinite(w) and w >= 0,
          f"data.weights[{i}]={w!r} in data.weights={weights} must be a finite number >= 0")
  check(not weights or sum(weights) > 0,
        f"data.weights={weights} sum to 0; at least one weight must be > 0 (or give () for equal weights)")
  rule = config.data.get("mixture_rule", MIXTURE_RULES[0])
  check(rule in MIXTURE_RULES, f"data.mixture_rule={rule!r}; allowed: {', '.join(map(repr, MIXTURE_RULES))}")
  pad_value(config)  # data.channel_padding is one of CHANNEL_PADDINGS
  return specs, channels
