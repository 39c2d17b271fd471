"""The shared training machinery: state, mesh, sharding, the one step, checkpoints, trainer."""

from jaxlab.train.mesh import make_mesh
from jaxlab.train.sharding import batch_sharding, host_to_global, tree_shardings
from jaxlab.train.state import TrainState, make_init_fn
from jaxlab.train.step import make_train_step, train_step_fn
