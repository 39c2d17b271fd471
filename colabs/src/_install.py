# %%
# Where jaxlab is installed from on Colab or a fresh machine: EDIT THIS LINE to your copy of the
# repository (a pip source: git+https://<host>/<owner>/jaxlab, git+...@<commit>, or a local folder).
# The default is a placeholder (colabs/README.md); $JAXLAB_SOURCE, when set, wins over this line.
JAXLAB_SOURCE = "git+https://github.com/jaxlab/jaxlab"
# jaxlab is installed, with the extras this notebook needs, only when it is not importable (locally
# and in the tests this does nothing). On a GPU/TPU runtime the preinstalled jax is pinned, so its
# accelerator backend stays.
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("jaxlab") is None:
  source = os.environ.get("JAXLAB_SOURCE", JAXLAB_SOURCE)
  package = f"{source}[{EXTRAS}]" if os.path.isdir(source) else f"jaxlab[{EXTRAS}] @ {source}"
  pins = []
  if importlib.util.find_spec("jax") is not None:
    from importlib.metadata import version
    pins = [f"jax=={version('jax')}"]
  subprocess.run([sys.executable, "-m", "pip", "install", "-q", package, *pins], check=True)
import jax
print(jax.devices())

# %% tags=["parameters"]
TINY = False  # the tests set True: every cell runs in seconds
