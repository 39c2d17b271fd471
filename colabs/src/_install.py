# %%
# Colab or a fresh machine: install jaxlab with the extras this notebook needs, only when it is not
# importable (locally and in the tests this does nothing). JAXLAB_REPO is where jaxlab is hosted.
# On a GPU/TPU runtime the preinstalled jax is pinned, so its accelerator backend stays.
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("jaxlab") is None:
  repo = os.environ.get("JAXLAB_REPO", "https://github.com/jaxlab/jaxlab")
  pins = []
  if importlib.util.find_spec("jax") is not None:
    from importlib.metadata import version
    pins = [f"jax=={version('jax')}"]
  subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"jaxlab[{EXTRAS}] @ git+{repo}", *pins], check=True)
import jax
print(jax.devices())

# %%
TINY = False  # the tests set True: every cell runs in seconds
