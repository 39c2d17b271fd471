"""A fine-tuning run's compatibility with the pre-trained run it starts from (``init_from.workdir``).

A DPOT / FNO fine-tuning run must have the pre-trained model's channels, channel padding, window
(``t_in``, ``t_out``) and model; the config saved with the pre-trained run's newest checkpoint is
compared with this run's, one line naming the key that differs. The caller reads that config
(``jaxlab.train.workdir.Workdir.saved_config``): nothing here opens a workdir.
"""

from __future__ import annotations

import ml_collections

from jaxlab.errors import InputError, check
from jaxlab.tasks.pde_data import channels_of, data_source, widest_set_channels


def check_pretrained_config(config: ml_collections.ConfigDict, channels: int, saved: dict | None) -> None:
  """A fine-tuning run (``init_from.workdir``) must have the pre-trained model's channels and window.

  Args:
    config: the fine-tuning run's config.
    channels: its data's channel count.
    saved: the config saved with the pre-trained run's newest checkpoint (None: nothing to check).
  """
  init_from = config.get("init_from", None)
  workdir = init_from.get("workdir", "") if init_from is not None else ""
  if not saved or "data" not in saved or ("sets" not in saved["data"] and saved["data"].get("source") != "files"):
    return
  if saved["data"].get("source") == "files" and not saved["data"].get("master") and data_source(config) == "files":
    # Its table came from $JAXLAB_PDE_MASTER then; without it now, this run's table is the one to look in.
    from jaxlab.pde.data.files.configured import master_path  # noqa: PLC0415 - h5py only for files
    saved = {**saved, "data": {**saved["data"], "master": master_path(config.data)}}
  try:
    theirs = channels_of(saved)
  except InputError:  # a files run whose master table is not readable here: the params' shapes are checked
    theirs = None     # when they are loaded (jaxlab.train.finetune)
  if theirs not in (None, channels):
    widest = widest_set_channels(config)
    # Padding only adds channels: a model of fewer channels than the widest set cannot take it.
    fix = (f"set data.num_channels={theirs} (missing channels are padded, see data.channel_padding)"
           if theirs >= widest else
           f"fine-tune on data sets of at most {theirs} channels (the widest set here has {widest}; "
           f"padding only adds channels)")
    raise InputError(f"init_from.workdir={workdir!r} was trained with {theirs} channels, this run's data have "
                     f"{channels}; {fix}")
  # A run saved before the switch existed padded with zeros; the model expects its padding value.
  padding = saved["data"].get("channel_padding", "zeros_masked")
  check(padding == config.data.get("channel_padding", "ones"),
        f"init_from.workdir={workdir!r} was trained with data.channel_padding={padding!r}, this run has "
        f"{config.data.get('channel_padding', 'ones')!r}; set data.channel_padding={padding!r}")
  for key in ("t_in", "t_out"):
    check(saved.get(key) == config[key], f"init_from.workdir={workdir!r} was trained with {key}={saved.get(key)}, "
          f"this run has {key}={config[key]}")
  check(saved.get("model", {}).get("name") == config.model.name,
        f"init_from.workdir={workdir!r} trained model.name={saved.get('model', {}).get('name')!r}, "
        f"this run has {config.model.name!r}")
