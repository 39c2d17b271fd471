"""Tasks: data + model + loss + evaluation + inference, built once from a config and the trainer's context.

The config layer's half for each method: the task factory (``dqn_minatar``, ``pde_operator``, ...)
and the method's config schema and checks (``dqn_config``, ``pde_config``, ``pde_data``, ...). The
protocol (``Task``, ``Inference``, ``TaskContext``) and the registry object (``TASKS``) live in
``jaxlab.train``; the shipped tasks register in it lazily by name here (``SHIPPED``), so importing
the trainer imports none of them.
"""

from jaxlab.train.context import TaskContext
from jaxlab.train.task import TASKS, Inference, Task
from jaxlab.tasks.registry import SHIPPED, make_task
