"""The shared training machinery: state, mesh, sharding, the one step, checkpoints, the loop.

The loop (``jaxlab.train.loop``) takes objects: a task, an optax transform, the run's options and a
workdir; turning a config into them is ``jaxlab.experiment``. Importing this package imports no
method: ``TASKS`` holds no names here (``jaxlab.tasks`` registers the shipped ones lazily).
"""

from jaxlab.train.mesh import make_mesh
from jaxlab.sharding import batch_sharding, host_to_global, sharding_report, tree_shardings
from jaxlab.train.state import TrainState, make_init_fn
from jaxlab.train.step import make_train_step, multi_step_fn, train_step_fn
from jaxlab.train.context import TaskContext
from jaxlab.train.task import TASKS, Inference, Task
