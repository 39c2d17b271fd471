"""PDE operator learning: DPOT (Hao et al., ICML 2024), AFNO Fourier attention, FNO, generated PDE data.

Model: ``DPOT`` (flax; presets ``make_dpot("Ti")`` ... ``make_dpot("H")`` in ``sizes``), its token mixer
``AFNO2D`` / pure ``afno2d`` (haiku: ``jaxlab.pde.afno_haiku.HkAFNO2D``), the ``FNO2d`` baseline.
Training: ``relative_l2_loss`` (the official objective), ``make_loss_fn`` for
``jaxlab.train.make_train_step``; evaluation: the auto-regressive ``rollout`` and its
``rollout_l2re``; tensor-parallel ``dpot_sharding_rules`` (``dpot_layout_rules``: one layout's rules, with
Soft-MoE experts over an "expert" axis for ``DPOT(mlp="softmoe")``). Official
checkpoints: ``convert_state_dict`` / ``params_to_state_dict`` / ``load_torch_checkpoint``.
Flax NNX modules of DPOT, its block, AFNO2D and FNO2d, same names and parameter layout, are in
``jaxlab.pde.nnx`` (imported on first use).
"""

from jaxlab.lazy_submodules import lazy_submodules as _lazy_submodules

from jaxlab.pde.afno import AFNO2D, afno2d
from jaxlab.pde.convert import convert_state_dict, expected_torch_shapes, load_torch_checkpoint, params_to_state_dict
from jaxlab.pde.dpot import DPOT, DPOTBlock, abstract_params, count_params, init_params
from jaxlab.pde.fno import FNO2d, spectral_conv2d
from jaxlab.pde.losses import add_denoising_noise, make_loss_fn, relative_l2_loss
from jaxlab.pde.rollout import rollout, rollout_l2re
from jaxlab.pde.sharding import DPOT_SHARDING_RULES, dpot_layout_rules, dpot_sharding_rules, dpot_state_shardings
from jaxlab.pde.sizes import DPOT_SIZES, OFFICIAL_PARAM_COUNTS, make_dpot, dpot_config

__all__ = [
    "abstract_params", "add_denoising_noise", "AFNO2D", "afno2d", "convert_state_dict", "count_params",
    "DPOT", "dpot_config", "dpot_layout_rules", "DPOT_SHARDING_RULES", "dpot_sharding_rules", "DPOT_SIZES",
    "dpot_state_shardings", "DPOTBlock", "expected_torch_shapes", "FNO2d", "init_params", "load_torch_checkpoint",
    "make_dpot", "make_loss_fn", "nnx", "OFFICIAL_PARAM_COUNTS", "params_to_state_dict", "relative_l2_loss",
    "rollout", "rollout_l2re", "spectral_conv2d",
]


__getattr__, __dir__ = _lazy_submodules(__name__, ("nnx",), __all__)  # flax.nnx only for who uses it
