# Two commands matter: `make demo` (the main job, CPU, no downloads) and `make test`.
# Both create .venv on first use from constraints.txt (the versions we tested) and reuse it after.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.jaxlab-installed
WORKDIR ?= runs/quickstart
PYTEST_ARGS ?=

.PHONY: demo test test-slow install clean-runs

$(STAMP): setup.cfg pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e ".[data,rl,pde,test,notebooks]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m jaxlab.main --config=configs/quickstart.py --workdir=$(WORKDIR)

test: $(STAMP)
	$(PY) -m pytest -q -n 2 $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

clean-runs:
	rm -rf runs
