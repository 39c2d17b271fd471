"""The command line's multi-process settings: flags, their environment variables, one-line errors."""

import pytest

from jaxlab.distributed import distributed_args
from jaxlab.errors import InputError

ENV = {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"}


def test_none_given_is_one_process_unless_distributed():
  assert distributed_args(environ={}) is None
  assert distributed_args(distributed=True, environ={}).kwargs == {}  # cluster auto-detection
  assert distributed_args(distributed=True, environ={"JAX_PROCESS_ID": ""}).kwargs == {}  # empty: not given


def test_flags_first_then_environment_variables():
  args = distributed_args(environ=ENV)  # the variables alone imply a distributed run
  assert args.kwargs == {"coordinator_address": "10.0.0.1:1234", "num_processes": 4, "process_id": 3}
  assert set(args.sources.values()) == set(ENV)
  args = distributed_args("localhost:99", None, "0", environ=ENV)
  assert args.kwargs == {"coordinator_address": "localhost:99", "num_processes": 4, "process_id": 0}
  assert args.sources == {"coordinator_address": "--coordinator_address", "num_processes": "JAX_NUM_PROCESSES",
                          "process_id": "--process_id"}


def test_some_given_leaves_the_rest_to_cluster_detection():
  args = distributed_args("localhost:1234", environ={})
  assert args.kwargs == {"coordinator_address": "localhost:1234"}
  assert args.missing() == ["--num_processes (JAX_NUM_PROCESSES)", "--process_id (JAX_PROCESS_ID)"]


@pytest.mark.parametrize("flags,environ,message", [
    ({"num_processes": "two"}, {}, "--num_processes=two; must be an int in [1, 1048576] (the number of processes in the job)"),
    ({"num_processes": "0"}, {}, "--num_processes=0; must be an int in [1, 1048576]"),
    ({}, {"JAX_PROCESS_ID": "-1"}, "JAX_PROCESS_ID=-1; must be an int >= 0 (this process's index)"),
    ({"num_processes": "2", "process_id": "2"}, {},
     "--process_id=2; must be an int in [0, 1] (this process's index; --num_processes=2)"),
    ({"process_id": "5"}, {"JAX_NUM_PROCESSES": "4"},
     "--process_id=5; must be an int in [0, 3] (this process's index; JAX_NUM_PROCESSES=4)"),
    ({"coordinator_address": "localhost"}, {},
     "--coordinator_address=localhost; must be host:port with a port in [1, 65535]"),
    ({}, {"JAX_COORDINATOR_ADDRESS": "localhost:http"}, "JAX_COORDINATOR_ADDRESS=localhost:http; must be host:port"),
    ({"coordinator_address": ":1234"}, {}, "--coordinator_address=:1234; must be host:port"),
])
def test_bad_values_name_the_flag_or_variable(flags, environ, message):
  with pytest.raises(InputError) as e:
    distributed_args(**flags, environ=environ)
  assert message in str(e.value) and "\n" not in str(e.value)
