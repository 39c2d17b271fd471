"""``python -m jaxlab.pde.data``: the PDE data command, :mod:`jaxlab.pde_data_command` (see there).

The command reads training configs, so it lives in the entry layer beside ``jaxlab.main``; this
file only runs it (the one import of the entry layer from a method package, declared in the
import contract, setup.cfg).
"""

from jaxlab.pde_data_command import run

if __name__ == "__main__":
  run()
