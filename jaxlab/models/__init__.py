"""Models by name (``MODELS``); flax.linen modules with functional init/apply."""

from jaxlab.models.registry import MODELS, make_model
