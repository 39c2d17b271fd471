#!/bin/sh
# The accelerator plan in one call (see benchmarks/accelerator.py): the wheels of .whl/ installed
# offline, then every part, one JSON. PYTHON defaults to python3 (else python).
cd "$(dirname "$0")/.." || exit 1
PY="${PYTHON:-$(command -v python3 || command -v python)}"
exec env PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 "$PY" benchmarks/accelerator.py "$@"
