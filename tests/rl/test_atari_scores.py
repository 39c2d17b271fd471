"""Atari 100k's score table, human normalisation and the IQM with stratified-bootstrap CIs."""

import math

import numpy as np
import pytest
from scipy import stats

from jaxlab.errors import InputError
from jaxlab.rl import atari_scores
from jaxlab.rl.atari_scores import ATARI_100K_GAMES, HUMAN_SCORES, RANDOM_SCORES, human_normalized, iqm_with_ci


def test_the_table_has_the_26_games_with_the_cited_values():
  assert len(ATARI_100K_GAMES) == len(set(ATARI_100K_GAMES)) == 26
  assert set(RANDOM_SCORES) == set(HUMAN_SCORES) == set(ATARI_100K_GAMES)
  # Spot checks against dopamine/labs/atari_100k/normalization_utils.py (@ 5873f54) and rliable's colab.
  assert (RANDOM_SCORES["Pong"], HUMAN_SCORES["Pong"]) == (-20.7, 14.6)
  assert (RANDOM_SCORES["Breakout"], HUMAN_SCORES["Breakout"]) == (1.7, 30.5)
  assert (RANDOM_SCORES["MsPacman"], HUMAN_SCORES["MsPacman"]) == (307.3, 6951.6)
  assert (RANDOM_SCORES["UpNDown"], HUMAN_SCORES["UpNDown"]) == (533.4, 11693.2)
  assert (RANDOM_SCORES["Freeway"], HUMAN_SCORES["Freeway"]) == (0.0, 29.6)
  assert all(HUMAN_SCORES[g] > RANDOM_SCORES[g] for g in ATARI_100K_GAMES)


def test_the_games_are_envpool_names():
  pytest.importorskip("envpool")
  from jaxlab.rl.atari import available_games  # noqa: PLC0415
  assert set(ATARI_100K_GAMES) <= set(available_games())


def test_human_normalisation_arithmetic():
  assert human_normalized("Pong", -20.7) == 0.0 and human_normalized("Pong", 14.6) == pytest.approx(1.0)
  assert human_normalized("Breakout", 16.1) == pytest.approx((16.1 - 1.7) / 28.8)
  np.testing.assert_allclose(human_normalized("Boxing", np.array([0.1, 12.1, 24.1])), [0.0, 1.0, 2.0])
  with pytest.raises(InputError, match="'pong' is not an Atari 100k game; did you mean 'Pong'"):
    human_normalized("pong", 0.0)
  with pytest.raises(InputError, match="'Asteroids' is not an Atari 100k game"):
    human_normalized("Asteroids", 0.0)


def test_iqm_is_the_25_75_trimmed_mean_and_the_ci_contains_it():
  rng = np.random.default_rng(0)
  a = rng.normal(size=(5, 4))  # [runs, games]
  b = a + 1.0
  out = iqm_with_ci({"a": a, "b": b}, reps=200)
  assert out["a"]["iqm"] == pytest.approx(stats.trim_mean(a.reshape(-1), 0.25))
  assert out["b"]["iqm"] == pytest.approx(out["a"]["iqm"] + 1.0)
  for r in out.values():
    assert r["ci_low"] < r["iqm"] < r["ci_high"] and (r["runs"], r["games"]) == (5, 4)
  # An explicit small case: 8 scores sorted -50, 1, 2, 3, 4, 5, 6, 100: the middle four 2..5 average 3.5.
  assert iqm_with_ci({"x": np.array([[1.0, 100.0, 3.0, 4.0, 5.0, 6.0, 2.0, -50.0]]).T}, reps=50)["x"]["iqm"] == 3.5
  state = np.random.get_state()[1].copy()
  iqm_with_ci({"a": a}, reps=20)
  np.testing.assert_array_equal(np.random.get_state()[1], state)  # numpy's global generator is restored


def test_iqm_refuses_bad_scores_in_one_line():
  with pytest.raises(InputError, match=r"scores\['a'\] has shape \(3,\); must be \[runs, games\]"):
    iqm_with_ci({"a": np.zeros(3)})
  with pytest.raises(InputError, match="non-finite"):
    iqm_with_ci({"a": np.array([[np.nan]])})
  with pytest.raises(InputError, match=r"variants have \[1, 2\] games"):
    iqm_with_ci({"a": np.zeros((2, 1)), "b": np.zeros((2, 2))})
  assert atari_scores.BOOTSTRAP_REPS == 2000


def test_iqm_scores_in_the_other_axis_order_are_refused_not_read_as_runs():
  pytest.importorskip("rliable")
  by_game = np.zeros((len(ATARI_100K_GAMES), 5))  # [games, runs]: 26 games of 5 runs
  with pytest.raises(InputError, match=r"shape \(26, 5\): 26 rows read as Atari 100k's 26 games of 5 runs or as 26 "
                                       r"runs of 5 games; must be \[runs, games\]: pass games= .* or scores\['der'\]\.T"):
    iqm_with_ci({"der": by_game})
  with pytest.raises(InputError, match=r"shape \(26, 5\): its rows are the 26 games \(games=26\); .* scores\['der'\]\.T"):
    iqm_with_ci({"der": by_game}, games=ATARI_100K_GAMES)
  with pytest.raises(InputError, match=r"shape \(4, 3\); must be \[runs, 5\] \(games=5\)"):
    iqm_with_ci({"der": np.zeros((4, 3))}, games=5)
  with pytest.raises(InputError, match=r"games=2.5; must be the columns' games"):
    iqm_with_ci({"der": np.zeros((4, 3))}, games=2.5)
  # Confirmed by games=, and the transpose: the same numbers, the 5 runs resampled within each game.
  rng = np.random.default_rng(1)
  runs_by_games = rng.normal(size=(5, len(ATARI_100K_GAMES)))
  out = iqm_with_ci({"der": runs_by_games}, reps=20, games=ATARI_100K_GAMES)["der"]
  assert (out["runs"], out["games"]) == (5, 26)
  square = iqm_with_ci({"der": np.zeros((26, 26))}, reps=5)["der"]  # square: the axes are not in question
  assert (square["runs"], square["games"]) == (26, 26)


def test_iqm_of_one_run_has_no_interval_and_reps_must_be_positive():
  pytest.importorskip("rliable")
  one = iqm_with_ci({"a": np.array([[0.1, 0.5, 0.9, 0.3]])}, reps=20)["a"]
  assert one["runs"] == 1 and one["iqm"] == pytest.approx(0.4)
  assert math.isnan(one["ci_low"]) and math.isnan(one["ci_high"])  # not a zero-width "95% CI"
  for reps in (0, -1, 2.0):
    with pytest.raises(InputError, match=rf"iqm_with_ci: reps={reps!r}; must be an int >= 1"):
      iqm_with_ci({"a": np.zeros((3, 2))}, reps=reps)
