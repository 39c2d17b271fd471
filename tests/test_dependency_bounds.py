"""setup.cfg's lower bounds are the releases whose APIs the code uses, and the installed versions meet them.

No network at test time, so nothing is resolved here: ``BOUNDS`` states, per dependency, the
lowest release setup.cfg allows and the API that needs it; the test checks that setup.cfg says
exactly that, and that this environment satisfies every requirement of setup.cfg.
"""

import configparser
import importlib.metadata
import pathlib

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

SETUP_CFG = pathlib.Path(__file__).resolve().parents[1] / "setup.cfg"

# distribution -> (lowest allowed release, the API of it that jaxlab uses and older releases lack or
# break). "Checked" means run here with that release (tests/rl/test_envs.py, tests/pde/data/test_steppers.py);
# the others name the API the bound is for.
BOUNDS = {
    "jax": ("0.7.1", "jax.set_mesh (trainer), jax.sharding.AxisType / reshard, jax.typeof (mesh and OT-CLIP sharding)"),
    "flax": ("0.12.1", "flax.nnx (the jaxlab.<package>.nnx modules): nnx.Dict (0.12.0), Variable.get_value (0.12.1); "
                       "flax.linen nn.scan / nn.remat over DPOT blocks on jax >= 0.7"),
    "optax": ("0.2.6", "optax.contrib.momo / momo_adam, the optax.tree namespace (tree.norm, tree.zeros_like)"),
    "chex": ("0.1.87", "chex.dataclass / assertions used by the optimizers and tests on jax >= 0.7"),
    "orbax-checkpoint": ("0.11.0", "ocp.CheckpointManager with ocp.args.Composite / StandardSave / JsonSave"),
    "ott-jax": ("0.5.0", "ott.solvers.linear.sinkhorn + implicit_differentiation, linear_problem.LinearProblem"),
    "dm-haiku": ("0.0.13", "hk.transform / hk.get_parameter on jax >= 0.4.26 (jax.config removal)"),
    "ml_collections": ("1.0.0", "config_flags.DEFINE_config_file with --config.<key> overrides"),
    "absl-py": ("2.1.0", "absl.app / flags (flags.FLAGS[name].present)"),
    "tqdm": ("4.66", "tqdm progress bars of data generation"),
    "tensorboardX": ("2.6", "SummaryWriter(purge_step=...)"),
    "tensorboard": ("2.16", "the viewer for tensorboardX event files: reads per-run tags (run_<i>/<metric>), `tensorboard --logdir`"),
    "numpy": ("1.26", "numpy >= 1.26 is the first release for Python 3.12"),
    # extras
    "scikit-learn": ("1.4", "sklearn.datasets.load_digits (digits tasks)"),
    "gymnax": ("1.0.1", "1.0.1 is the first with Seaquest "
                        "(0.0.9 raises NotImplementedError) and with Space Invaders as MinAtar starts it (0.0.9: "
                        "7 alien columns, not 6, and the bullet hit checked at the old position); jaxlab.rl.envs "
                        "still reads both step signatures (0.0.x: 5 values, >= 1.0: 6), and tests/rl/test_envs.py "
                         "passes with 0.0.9; 0.0.8 calls jax.tree_map, gone in jax 0.6. The bound also keeps pip "
                         "from choosing 0.0.9 (which declares no jax cap) beside a jax >= 0.12"),
    "gymnasium": ("1.1", "the atari extra's, for ale-py's vector env (gymnasium.vector.AutoresetMode, ale-py's own "
                         "'vector' extra says >=1.1.0); gymnax 1.0.1 asks the same (gymnasium>=1.1,<1.4)"),
    "six": ("1.16", "rliable's missing dependency"),
    "flashbax": ("0.1.2", "flashbax.make_flat_buffer, buffers.trajectory_buffer.TrajectoryBufferState"),
    "rliable": ("1.0.8", "rliable.library / metrics (interquartile mean, stratified bootstrap)"),
    "exponax": ("0.1.0", "exponax.stepper.KolmogorovFlowVorticity, nonlin_fun.VorticityConvection2d, "
                         "_spectral.build_laplace_operator, exponax.fft / ifft. Checked: tests/pde/data/test_steppers.py "
                         "passes with 0.1.0"),
    "h5py": ("3.9", "h5py.File with lazy row reads of DPOT/PDEBench/The Well HDF5 files (3.9: numpy 2 support)"),
    "envpool": ("1.2.5", "env.xla() through XLA's FFI inside jit (jaxlab.rl.atari) and Atari v5 with the ROMs "
                           "packaged; 1.2.5 is the release tested (tests/rl/test_atari.py), 0.8.x has another XLA interface"),
    "ale-py": ("0.12", "ale_py.vector_env.AtariVectorEnv with xla() (0.12.0 added it) and seeded reset(seed=array) "
                       "(jaxlab.rl.atari_ale); 0.12.1 is the release tested (tests/rl/test_atari_ale.py)"),
    "grain": ("0.2.2", "grain.MapDataset / IndexSampler with ShardOptions (per-process image-text rows)"),
    "tokenizers": ("0.15", "tokenizers.Tokenizer with WordLevel/BPE trainers, Tokenizer.from_file"),
    "pyarrow": ("14", "pyarrow.parquet.read_table for precomputed embedding pairs"),
    "pillow": ("10", "PIL.Image.open / convert / resize of the user's images"),
    "jupytext": ("1.16", "jupytext.read / writes of percent-format sources paired with colabs/*.ipynb"),
    "nbclient": ("0.10", "nbclient.NotebookClient execution in a real kernel"),
    "ipykernel": ("6.29", "the python3 kernel nbclient starts"),
    "sphinx": ("7.2", "the docs build (autodoc, napoleon) with -W"),
    "myst-nb": ("1.1", "MyST pages and notebooks rendered from stored outputs (nb_execution_mode='off')"),
    "sphinx-book-theme": ("1.1", "the docs theme (optax and flax use it)"),
    "matplotlib": ("3.8", "pyplot figures of the notebooks and benchmarks"),
    "pytest": ("8.0", "the test suite"),
    "import-linter": ("2.0", "layers contracts with independent (`|`) and non-independent (`:`) siblings, checked by "
                             "importlinter.cli.lint_imports in tests/test_layers.py"),
    "pytest-xdist": ("3.5", "-n parallel test runs"),
    "webdataset": ("1.0.2", "webdataset.TarWriter / WebDataset writing and reading the shards the tests index "
                            "(jaxlab itself reads shards without it); 1.0.2 is the release tested"),
    "braceexpand": ("0.1.7", "braceexpand.braceexpand, the reference the shard-pattern expansion is tested against"),
}


def _requirements() -> list[tuple[str, Requirement]]:
  """``(section, requirement)`` for install_requires and every extra of setup.cfg."""
  cfg = configparser.ConfigParser()
  cfg.read(SETUP_CFG)
  sections = [("install_requires", cfg["options"]["install_requires"])]
  sections += [(f"extras_require.{k}", v) for k, v in cfg["options.extras_require"].items()]
  out = []
  for where, text in sections:
    for line in text.splitlines():
      line = line.split("#")[0].strip()
      if line:
        out.append((where, Requirement(line)))
  return out


def _lower_bound(req: Requirement) -> str | None:
  lows = [s.version for s in req.specifier if s.operator == ">="]
  return max(lows, key=Version) if lows else None


def _name(req: Requirement) -> str:
  return req.name.lower().replace("_", "-")


def test_every_lower_bound_is_stated_with_the_api_that_needs_it():
  table = {k.lower().replace("_", "-"): v for k, v in BOUNDS.items()}
  for where, req in _requirements():
    low = _lower_bound(req)
    if low is None:
      continue  # an upper bound only (pandas<3 for rliable's arch)
    assert _name(req) in table, f"{where}: {req} has a lower bound that BOUNDS does not explain"
    assert Version(low) == Version(table[_name(req)][0]), \
        f"{where}: {req}; BOUNDS says >={table[_name(req)][0]} ({table[_name(req)][1]})"
  declared = {_name(req) for _, req in _requirements()}
  assert set(table) <= declared, f"BOUNDS names dependencies setup.cfg lacks: {set(table) - declared}"


@pytest.mark.parametrize("where, req", _requirements(), ids=lambda x: str(x))
def test_installed_versions_satisfy_setup_cfg(where, req):
  try:
    installed = importlib.metadata.version(req.name)
  except importlib.metadata.PackageNotFoundError:
    if where == "install_requires":
      raise
    pytest.skip(f"{req.name} (extra {where}) is not installed")
  assert req.specifier.contains(installed, prereleases=True), f"{where}: {req}, installed {installed}"
