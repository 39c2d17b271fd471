# Two commands matter: `make demo` (the main job, CPU, no downloads) and `make test`.
# Both create .venv on first use from constraints.txt (the versions we tested) and reuse it after.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.jaxlab-installed
WORKDIR ?= runs/quickstart
PYTEST_ARGS ?=

# test-latest: Python 3.12 with the newest releases (what Colab / TPU users get from `pip install`),
# no constraints, the newest jax; run it before resolving an issue. Its venv is rebuilt when setup.cfg changes.
PYTHON_LATEST ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12; do \
                   $$p -c 'import sys' >/dev/null 2>&1 && echo $$p && break; done)
VENV_LATEST ?= .venv-latest

.PHONY: demo test test-slow test-latest install clean-runs docs docs-light bench-rejax device-wheels

$(STAMP): setup.cfg pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e ".[data,rl,pde,atari,clip_data,test,notebooks,docs,tensorboard]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m jaxlab.main --config=configs/quickstart.py --workdir=$(WORKDIR)

test: $(STAMP)
	$(PY) -m pytest -q -n 2 $(PYTEST_ARGS)

$(VENV_LATEST)/.jaxlab-installed: setup.cfg pyproject.toml
	@test -n "$(PYTHON_LATEST)" || (echo "test-latest needs python3.12 (set PYTHON_LATEST=...)"; exit 1)
	$(PYTHON_LATEST) -m venv $(VENV_LATEST)
	$(VENV_LATEST)/bin/python -m pip install -q --upgrade pip
	$(VENV_LATEST)/bin/python -m pip install -q --upgrade -e ".[data,rl,pde,atari,clip_data,test,notebooks,docs,tensorboard]"
	# the rl extra's gymnax 1.0.1 declares jax<0.12, so the line above resolves jax 0.11.2; every other
	# extra gets the newest jax, which is what this suite tests: jax upgraded past gymnax's cap, as a user
	# keeping a newer jax does (docs/getting_started.md). pip names the cap it skipped; that is expected.
	$(VENV_LATEST)/bin/python -m pip install -q --upgrade jax jaxlib
	touch $@

test-latest: $(VENV_LATEST)/.jaxlab-installed
	$(VENV_LATEST)/bin/python -m pip list 2>/dev/null | grep -iE "^(jax|jaxlib|flax|optax|numpy|orbax-checkpoint|ott-jax|gymnax) "
	$(VENV_LATEST)/bin/python -m pytest -q -n 2 $(PYTEST_ARGS)

# The documentation site (docs/), warnings as errors: a dead cross-reference or a public name
# without a docstring fails it. Open docs/_build/html/index.html.
docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

# The same site from a small venv: jaxlab's core dependencies and the docs extra only, no method
# extras (gymnax, envpool, exponax, h5py, grain, ...). docs/conf.py mocks each optional package
# that is not installed (autodoc_mock_imports), so every page still renders and -W still holds.
VENV_DOCS ?= .venv-docs
$(VENV_DOCS)/.jaxlab-installed: setup.cfg pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV_DOCS)
	$(VENV_DOCS)/bin/python -m pip install -q --upgrade pip
	$(VENV_DOCS)/bin/python -m pip install -q -c constraints.txt -e ".[docs]"
	touch $@

docs-light: $(VENV_DOCS)/.jaxlab-installed
	$(VENV_DOCS)/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

clean-runs:
	rm -rf runs

# jaxlab's DQN beside rejax's (benchmarks/rl_rejax_throughput.py) in its own venv, .venv-rejax
# (rejax 0.1.3 needs gymnax 0.0.9; benchmarks/rejax_constraints.txt). REJAX_ARGS: the script's arguments
# (the default: every row >= 100k frames, 3 interleaved repeats; ~80 minutes on a quiet 2-core machine,
# estimated from the rates of the 1k-frame run in benchmarks/results/rl/rejax_throughput.json, not measured).
REJAX_ARGS ?= --frames=100000 --frames_all_seeds --repeats=3 --out=benchmarks/results/rl/rejax_throughput.json
bench-rejax:
	benchmarks/rl_rejax_throughput.sh $(REJAX_ARGS)

# The wheels the GPU plan (benchmarks/accelerator.sh) installs offline on a machine that has jax with
# CUDA, flax, optax, chex, orbax-checkpoint, h5py and numpy: benchmarks/device_wheels.txt, ~43 MiB for
# CPython 3.12 on manylinux x86-64, into .whl/ (ignored), each file checked against its size and sha256.
device-wheels:
	$(PYTHON) benchmarks/device_wheels.py download --dest .whl
