"""The command line, end to end, in a fresh process (as a user runs it: the ``cli`` fixture)."""

import json
import os


def test_quickstart_tiny_trains_resumes_and_prints_summary(cli, tmp_path):
  workdir = str(tmp_path / "run")
  p = cli.main("--config=configs/quickstart.py:tiny", f"--workdir={workdir}", "--stop_after=12")
  assert p.returncode == 0, p.stderr
  p = cli.main("--config=configs/quickstart.py:tiny", f"--workdir={workdir}")
  assert p.returncode == 0, p.stderr
  assert "test_accuracy" in p.stdout and "steps_per_sec" in p.stdout
  rows = [json.loads(l) for l in open(os.path.join(workdir, "digits_mlp", "metrics.jsonl"))]
  assert [r["step"] for r in rows] == [5, 10, 15, 20]
  assert "opt/step_size" in rows[-1]  # MoMo's adaptive step reaches the metrics
  clip_rows = [json.loads(l) for l in open(os.path.join(workdir, "digits_clip", "metrics.jsonl"))]
  assert "zero_shot_accuracy" in clip_rows[-1] and "ot_zero_shot_accuracy" in clip_rows[-1]
  # again, one experiment longer: the finished one says so and prints its summary; the resume's
  # warning about the changed num_steps is one line, once, in the command line's form
  p = cli.main("--config=configs/quickstart.py:tiny", f"--workdir={workdir}", "--config.experiments.digits_mlp.num_steps=25")
  assert p.returncode == 0, p.stderr
  assert "jaxlab: digits_clip: already complete at step 20 (nothing trained" in p.stderr, p.stderr
  assert "status" in p.stdout and "already complete at step 20" in p.stdout and "zero_shot_accuracy" in p.stdout
  warned = [line for line in p.stderr.replace("\r", "\n").splitlines() if "changed num_steps" in line]
  assert warned == [f"jaxlab: warning: resuming {os.path.join(workdir, 'digits_mlp', 'checkpoints', '20')} with "
                    "changed num_steps: 20 there, 25 here (a learning-rate schedule follows the new num_steps)"], p.stderr
  assert "Warning" not in p.stderr, p.stderr  # no raw UserWarning, nor its source line
  assert [json.loads(l)["step"] for l in open(os.path.join(workdir, "digits_mlp", "metrics.jsonl"))][-1] == 25


def test_unknown_config_key_lists_valid_keys(cli, tmp_path):
  p = cli.main("--config=configs/quickstart.py:tiny", f"--workdir={tmp_path}",
               "--config.experiments.digits_mlp.optimizer.lr=3")
  assert p.returncode != 0
  assert "unknown config key(s) ['experiments.digits_mlp.optimizer.lr']" in p.stderr
  assert "experiments.digits_mlp.optimizer.learning_rate" in p.stderr


def test_bad_mesh_is_one_clear_line(cli, tmp_path):
  p = cli.main("--config=configs/quickstart.py:tiny", f"--workdir={tmp_path}",
               "--config.experiments.digits_mlp.mesh=((\"data\", 3), (\"model\", 1))")
  assert p.returncode == 2
  assert "needs a multiple of 3 devices" in p.stderr and "Traceback" not in p.stderr


import pytest  # noqa: E402


@pytest.mark.parametrize("args,message", [
    (["--config=configs/nope.py"], "config 'configs/nope.py' not found (a file path, or one of: clip_files, digits_clip"),
    (["--config=README.md"], "is not a Python file"),
    (["--config=configs/__init__.py"], "defines no get_config(arg) function"),
    (["--config=quickstart:huge"], "takes no argument or 'tiny', got 'huge'"),
    (["--config=digits_mlp:tiny", "--config.batch_size=abc"], "flag --config.batch_size=abc: invalid literal for int()"),
    (["--config=quickstart:tiny", "--config.experiments.digits_mlp.batch_size=0"],
     "experiments.digits_mlp: batch_size must be an integer >= 1, got 0"),
    (["--config=digits_mlp:tiny", "--config.mesh=(\"data\",-1)"], "mesh must be a tuple of (axis name, size) pairs"),
    (["--config=digits_mlp:tiny", "--config.mesh=((\"Data\",-1),)"], "the mesh needs a 'data' axis"),
    (["--config=digits_mlp:tiny", "--stop_after=-1"],
     "--stop_after=-1 (stop_after) would train nothing; allowed: a step >= 1 to stop after, or no --stop_after"),
])
def test_bad_input_on_the_command_line_is_one_line(cli, tmp_path, args, message):
  p = cli.main(*args, f"--workdir={tmp_path / 'new'}")
  assert p.returncode == 2, p.stderr
  assert message in p.stderr and "Traceback" not in p.stderr
  assert len([l for l in p.stderr.splitlines() if l.startswith("jaxlab: error:")]) == 1
  assert not (tmp_path / "new").exists()  # a refused command leaves no workdir behind


def test_config_by_name_from_another_directory(cli, tmp_path):
  # jaxlab as installed: no checkout put on PYTHONPATH for it (the caller's own PYTHONPATH kept)
  p = cli.main("--config=digits_mlp:tiny", f"--workdir={tmp_path}", "--config.num_steps=4", "--config.log_every=2",
               cwd=tmp_path, env={"PYTHONPATH": os.environ.get("PYTHONPATH")})
  assert p.returncode == 0, p.stderr
  assert "final_loss" in p.stdout


def test_fine_tuning_from_the_command_line(cli, tmp_path):
  from tests.support.tolerances import ops_rtol
  example = os.path.join("configs", "examples", "robust_regression.py")  # params: w (3,), b ()
  pre, tuned = str(tmp_path / "pre"), str(tmp_path / "tuned")
  p = cli.main(f"--config={example}:tiny", f"--workdir={pre}")
  assert p.returncode == 0, p.stderr
  p = cli.main(f"--config={example}:tiny", f"--workdir={tuned}", f"--config.init_from.workdir={pre}",
               "--config.init_from.reinit=^b$", "--config.optimizer.freeze=^w$")
  assert p.returncode == 0, p.stderr
  assert (f"jaxlab: fine-tuning from {pre} (step 20): 1 param leaves loaded, 1 re-initialised (init_from.reinit), "
          "1 frozen (optimizer.freeze)") in p.stderr
  assert f"{pre} (step 20)" in [l for l in p.stdout.splitlines() if l.startswith("init_from")][0]
  error_pre, error_tuned = ([json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))][-1]["weight_error"]
                            for d in (pre, tuned))
  # w loaded and frozen: ||w - w_true|| is the pre-trained one (3 subtractions, squares, adds, a sqrt).
  assert abs(error_tuned - error_pre) <= ops_rtol(10) * error_pre

  bad = cli.main(f"--config={example}:tiny", f"--workdir={tmp_path / 'bad'}", f"--config.init_from.workdir={pre}",
                 "--config.optimizer.freeze=^head/")
  assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
  assert bad.stderr.strip().splitlines() == [
      "jaxlab: error: optimizer.freeze pattern '^head/' matches no parameter (paths look like: b, w)"]


@pytest.mark.parametrize("args,env,message", [
    (["--num_processes=2", "--process_id=2"], {}, "--process_id=2; must be an int in [0, 1]"),
    ([], {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"},
     "JAX_NUM_PROCESSES=2 and JAX_PROCESS_ID=0 given without --coordinator_address (JAX_COORDINATOR_ADDRESS), "
     "and no cluster (Cloud TPU, SLURM, Open MPI) was detected to supply it"),
])
def test_bad_multi_process_settings_are_one_line(cli, tmp_path, args, env, message):
  p = cli.main("--config=digits_mlp:tiny", f"--workdir={tmp_path / 'new'}", *args, env=env)
  assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
  errors = [l for l in p.stderr.splitlines() if l.startswith("jaxlab: error:")]
  assert len(errors) == 1 and message in errors[0], p.stderr
  assert not (tmp_path / "new").exists()
