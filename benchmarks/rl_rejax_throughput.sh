#!/bin/sh
# jaxlab's dqn_minatar beside rejax's DQN (benchmarks/rl_rejax_throughput.py), the same network in both.
# Makes .venv-rejax on first use: rejax 0.1.3 and its pinned dependencies (benchmarks/rejax_constraints.txt),
# then jaxlab from this checkout with --no-deps plus what jaxlab.rl imports (flashbax, ml_collections, absl,
# chex; also pinned there). Arguments go to the Python script, e.g.
#   benchmarks/rl_rejax_throughput.sh --frames=100000 --frames_all_seeds --repeats=3 --out=benchmarks/results/rl/rejax_throughput.json
# PYTHON: the interpreter the venv is made from (default python3; 3.10-3.12). VENV: its path.
set -e
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv-rejax}"
STAMP="$VENV/.rejax-installed"
if [ ! -f "$STAMP" ] || [ benchmarks/rejax_constraints.txt -nt "$STAMP" ]; then
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q -c benchmarks/rejax_constraints.txt \
      rejax==0.1.3 gymnax==0.0.9 jax jaxlib flax optax distrax flashbax ml_collections absl-py chex
  "$VENV/bin/python" -m pip install -q --no-deps -e .
  touch "$STAMP"
fi
"$VENV/bin/python" -c "from importlib.metadata import version as v; print(*(f'{p} {v(p)}' for p in ('rejax', 'gymnax', 'jax', 'flax')))"
exec nice -n 5 "$VENV/bin/python" benchmarks/rl_rejax_throughput.py "$@"
