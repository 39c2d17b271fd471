#!/bin/sh
# The accelerator check: see benchmarks/accelerator.py. PYTHON defaults to python.
cd "$(dirname "$0")/.." && exec env PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python}" benchmarks/accelerator.py "$@"
