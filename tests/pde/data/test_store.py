"""The disk cache: hits and misses, atomic writes, checked loads, where it lives, the split."""

import json
import signal
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.pde.data import (ENV_VAR, cache_root, dataset_dir, dataset_spec, generate, load_cached,
                             load_dataset, load_or_generate)
from jaxlab.pde.data import generator, store

TINY = dict(resolution=16, num_frames=2, dt=0.125, order=2)  # ns_fno, quick to compile


def _spec(n=3, **kw):
  return dataset_spec("ns_fno", n, **{**TINY, **kw})


def _count_generate_calls(monkeypatch, fake=False):
  calls = []
  real = generator.generate

  def counting(spec, out, **kw):
    calls.append(spec.name)
    if fake:  # no solver: constant data, for cache logic alone
      out[:] = len(calls)
      return out
    return real(spec, out=out, **kw)

  monkeypatch.setattr(generator, "generate", counting)
  return calls


def test_cache_miss_then_hit(tmp_path, monkeypatch):
  calls = _count_generate_calls(monkeypatch)
  spec = _spec(3)
  first = load_or_generate(spec, tmp_path, progress=False)
  assert calls == ["ns_fno"] and isinstance(first, np.memmap)
  folder = dataset_dir(spec, tmp_path)
  assert sorted(p.name for p in folder.iterdir()) == ["settings.json", "trajectories.npy"]
  assert json.loads((folder / "settings.json").read_text())["params"]["viscosity"] == 1e-3
  again = load_or_generate(spec, tmp_path, progress=False)
  assert calls == ["ns_fno"]  # hit: nothing generated
  np.testing.assert_array_equal(first, again)
  np.testing.assert_array_equal(first, generate(spec, progress=False))
  assert not list((tmp_path / "pde_data").glob(".tmp-*"))


def test_a_changed_setting_misses(tmp_path, monkeypatch):
  calls = _count_generate_calls(monkeypatch, fake=True)
  a = load_or_generate(_spec(3), tmp_path, progress=False)
  b = load_or_generate(_spec(3, viscosity=2e-3), tmp_path, progress=False)
  c = load_or_generate(_spec(3, viscosity=2e-3), tmp_path, progress=False)
  assert len(calls) == 2 and a[0, 0, 0, 0, 0] == 1 and b[0, 0, 0, 0, 0] == c[0, 0, 0, 0, 0] == 2
  assert len(list((tmp_path / "pde_data").iterdir())) == 2


def test_failed_generation_leaves_no_cache(tmp_path, monkeypatch):
  spec = _spec(3)

  def half_then_fail(spec, out, **kw):
    out[0] = 1.0
    raise KeyboardInterrupt  # as if stopped mid-way

  monkeypatch.setattr(generator, "generate", half_then_fail)
  with pytest.raises(KeyboardInterrupt):
    load_or_generate(spec, tmp_path, progress=False)
  assert list((tmp_path / "pde_data").iterdir()) == []
  assert load_cached(spec, tmp_path) is None


def test_killed_generation_leaves_no_cache_and_its_temp_is_swept(cli, tmp_path):
  # A real SIGKILL mid-generation (one trajectory per chunk, many chunks).
  script = textwrap.dedent(f"""
      from jaxlab.pde.data import dataset_spec, load_or_generate
      spec = dataset_spec("ns_fno", 400, resolution=16, num_frames=2, dt=0.125, order=2)
      load_or_generate(spec, {str(tmp_path)!r}, chunk_size=1, progress=False)
  """)
  proc = cli.popen([sys.executable, "-c", script], env={"JAX_PLATFORMS": "cpu"})
  spec = dataset_spec("ns_fno", 400, resolution=16, num_frames=2, dt=0.125, order=2)
  temp_glob = f".tmp-{dataset_dir(spec, tmp_path).name}-*"
  deadline = time.time() + 120
  while time.time() < deadline and not list((tmp_path / "pde_data").glob(temp_glob + "/trajectories.npy")):
    assert proc.poll() is None, "generation ended before it could be killed"
    time.sleep(0.2)
  time.sleep(1.0)  # let it write a few chunks
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert len(list((tmp_path / "pde_data").glob(temp_glob))) == 1  # the killed run's temp folder
  assert load_cached(spec, tmp_path) is None  # ...and no cache
  store._remove_stale_temps(dataset_dir(spec, tmp_path))  # what the next generation does first
  assert list((tmp_path / "pde_data").iterdir()) == []


def test_loading_checks_settings_shape_and_finiteness(tmp_path, monkeypatch):
  _count_generate_calls(monkeypatch, fake=True)
  spec = _spec(3)
  load_or_generate(spec, tmp_path, progress=False)
  data = dataset_dir(spec, tmp_path) / "trajectories.npy"
  array = np.load(data)
  array[1, 2, 3, 4, 0] = np.nan
  np.save(data, array)
  with pytest.raises(InputError, match=r"data set 'ns_fno': loaded trajectory 1 has non-finite"):
    load_cached(spec, tmp_path)
  np.save(data, array[:, :2])
  with pytest.raises(InputError, match=r"shape \(3, 2, 16, 16, 1\).*needs \(3, 3, 16, 16, 1\)"):
    load_cached(spec, tmp_path)
  np.save(data, array.astype(np.float64))
  with pytest.raises(InputError, match="float64"):
    load_cached(spec, tmp_path)
  settings = dataset_dir(spec, tmp_path) / "settings.json"
  settings.write_text(settings.read_text().replace('"seed": 0', '"seed": 7'))
  with pytest.raises(InputError, match="other settings"):
    load_cached(spec, tmp_path)


def test_cache_root_argument_then_env_then_home(tmp_path, monkeypatch):
  monkeypatch.setenv(ENV_VAR, str(tmp_path / "env"))
  assert cache_root(tmp_path / "arg") == (tmp_path / "arg").resolve()
  assert cache_root() == (tmp_path / "env").resolve()
  monkeypatch.delenv(ENV_VAR)
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  assert cache_root() == (tmp_path / "home" / ".cache" / "jaxlab").resolve()
  repo = Path(store.__file__).resolve().parents[3]
  with pytest.raises(InputError, match="inside the jaxlab source tree"):
    cache_root(repo / "data_cache")


def test_load_dataset_splits_by_trajectory(tmp_path, monkeypatch):
  _count_generate_calls(monkeypatch, fake=True)
  ds = load_dataset(_spec(5), tmp_path, num_test=2, progress=False)
  assert ds.name == "ns_fno" and ds.channel_names == ("vorticity",)
  assert list(ds.split_indices("train")) == [0, 1, 2] and list(ds.split_indices("test")) == [3, 4]
  assert load_dataset(_spec(5), tmp_path, progress=False).num_test == 1  # default: 10%, >= 1


def test_first_frame_serves_fnos_u_frames_without_w0(tmp_path, monkeypatch):
  """DPOT's NS data are FNO's ``u`` (t = 1..T); frame 0 of an ns_fno set is w0 (FNO's ``a``)."""
  def frame_index(spec, out, **kw):
    out[:] = np.arange(spec.num_frames, dtype=np.float32)[None, :, None, None, None]
    return out
  monkeypatch.setattr(generator, "generate", frame_index)
  spec = _spec(4, num_frames=5)
  full = load_dataset(spec, tmp_path, num_test=1, progress=False)
  u = load_dataset(spec, tmp_path, num_test=1, first_frame=1, progress=False)
  assert full.num_frames == 6 and u.num_frames == 5
  np.testing.assert_array_equal(u.trajectories[:, :, 0, 0, 0], np.tile(np.arange(1, 6), (4, 1)))
  assert isinstance(u.trajectories, np.memmap)  # a view of the cache, nothing copied
  with pytest.raises(InputError, match="first_frame=5 must be an int in \\[0, 4\\]"):
    load_dataset(spec, tmp_path, first_frame=5, progress=False)
