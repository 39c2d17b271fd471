"""AFNO2D as a haiku module, over the same pure function as the flax layer (``jaxlab.pde.afno.afno2d``).

Use inside ``hk.transform``; parameters ``w1, b1, w2, b2`` have the official layout and init.
"""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp

from jaxlab.errors import check
from jaxlab.pde.afno import afno2d, afno_init_scale, afno_param_shapes, check_afno_sizes, split_uniform


class HkAFNO2D(hk.Module):
  """Haiku twin of :class:`jaxlab.pde.afno.AFNO2D`: (B, X, Y, width) -> same shape."""

  def __init__(self, width: int, n_blocks: int = 8, modes: int = 32, hidden_size_factor: int = 1,
               act: str = "gelu", name: str | None = None):
    super().__init__(name=name)
    check_afno_sizes("HkAFNO2D", width, n_blocks, hidden_size_factor, modes)
    self.width, self.n_blocks, self.modes = width, n_blocks, modes
    self.hidden_size_factor, self.act = hidden_size_factor, act

  def __call__(self, x: jax.Array) -> jax.Array:
    check(x.shape[-1] == self.width, f"AFNO2D input has {x.shape[-1]} channels, expected width={self.width}")
    scale = afno_init_scale(self.width, self.n_blocks, self.hidden_size_factor)
    shapes = afno_param_shapes(self.width, self.n_blocks, self.hidden_size_factor)
    draws = split_uniform(hk.next_rng_key(), shapes, scale) if hk.running_init() else {}
    p = {name: hk.get_parameter(name, shape, jnp.float32, init=lambda *_, name=name: draws[name])
         for name, shape in shapes.items()}
    return afno2d(x, p["w1"], p["b1"], p["w2"], p["b2"], modes=self.modes, act=self.act)
