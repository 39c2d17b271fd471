"""Supervised losses by name (``LOSSES``). Method-specific losses live with their method."""

from jaxlab.losses.classification import LOSSES, softmax_cross_entropy
