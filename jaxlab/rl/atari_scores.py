"""Atari 100k reporting: the random and human scores of its 26 games, human-normalised scores, IQM.

The Atari 100k benchmark (Kaiser et al., "Model-Based Reinforcement Learning for Atari", ICLR
2020) trains for 100k agent steps (400k frames) on 26 games and reports human-normalised scores
``(score - random) / (human - random)`` aggregated over games and runs with the interquartile mean
(IQM) and 95% stratified-bootstrap confidence intervals (Agarwal et al., "Deep Reinforcement
Learning at the Edge of the Statistical Precipice", NeurIPS 2021).

Sources of the table (both list the same numbers for these 26 games):

* the game list and both score tables of rliable's Atari 100k colab, google-research/rliable
  ``deep_rl_precipice_colab.ipynb``, cells "Atari 100k -- List of 26 Games" and "Score data for
  Human and random agent" (@ 3ccd9f4);
* Dopamine's ``ATARI_HUMAN_SCORES`` / ``ATARI_RANDOM_SCORES``, which its Atari 100k runner
  normalises with, ``dopamine/labs/atari_100k/normalization_utils.py:17-133`` (@ 5873f54).

Game names are the ALE's / envpool's ("MsPacman", "Jamesbond", "UpNDown"), which
:func:`jaxlab.rl.atari.make_atari` takes.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from jaxlab.errors import InputError, check, check_int, is_int
from jaxlab.registry import optional_imports

#: The 26 games of Atari 100k, in the order rliable lists them.
ATARI_100K_GAMES: tuple[str, ...] = (
    "Alien", "Amidar", "Assault", "Asterix", "BankHeist", "BattleZone", "Boxing", "Breakout", "ChopperCommand",
    "CrazyClimber", "DemonAttack", "Freeway", "Frostbite", "Gopher", "Hero", "Jamesbond", "Kangaroo", "Krull",
    "KungFuMaster", "MsPacman", "Pong", "PrivateEye", "Qbert", "RoadRunner", "Seaquest", "UpNDown")

#: Score of a uniformly random policy per game (rliable colab; Dopamine normalization_utils.py:75-133).
RANDOM_SCORES: dict[str, float] = {
    "Alien": 227.8, "Amidar": 5.8, "Assault": 222.4, "Asterix": 210.0, "BankHeist": 14.2, "BattleZone": 2360.0,
    "Boxing": 0.1, "Breakout": 1.7, "ChopperCommand": 811.0, "CrazyClimber": 10780.5, "DemonAttack": 152.1,
    "Freeway": 0.0, "Frostbite": 65.2, "Gopher": 257.6, "Hero": 1027.0, "Jamesbond": 29.0, "Kangaroo": 52.0,
    "Krull": 1598.0, "KungFuMaster": 258.5, "MsPacman": 307.3, "Pong": -20.7, "PrivateEye": 24.9, "Qbert": 163.9,
    "RoadRunner": 11.5, "Seaquest": 68.4, "UpNDown": 533.4}

#: Human tester's score per game (rliable colab; Dopamine normalization_utils.py:17-73).
HUMAN_SCORES: dict[str, float] = {
    "Alien": 7127.7, "Amidar": 1719.5, "Assault": 742.0, "Asterix": 8503.3, "BankHeist": 753.1,
    "BattleZone": 37187.5, "Boxing": 12.1, "Breakout": 30.5, "ChopperCommand": 7387.8, "CrazyClimber": 35829.4,
    "DemonAttack": 1971.0, "Freeway": 29.6, "Frostbite": 4334.7, "Gopher": 2412.5, "Hero": 30826.4,
    "Jamesbond": 302.8, "Kangaroo": 3035.0, "Krull": 2665.5, "KungFuMaster": 22736.3, "MsPacman": 6951.6,
    "Pong": 14.6, "PrivateEye": 69571.3, "Qbert": 13455.0, "RoadRunner": 7845.0, "Seaquest": 42054.7,
    "UpNDown": 11693.2}

#: Bootstrap replicates of the CIs: 2000, as ``jaxlab.report`` (rliable's ``get_interval_estimates`` default: 50000).
BOOTSTRAP_REPS = 2000


def check_atari_100k_game(game: object, key: str = "game") -> None:
  """InputError unless ``game`` is one of :data:`ATARI_100K_GAMES`; ``key`` names the setting."""
  if not isinstance(game, str) or game not in RANDOM_SCORES:
    close = [g for g in ATARI_100K_GAMES if isinstance(game, str) and g.lower() == game.lower().replace("_", "")]
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise InputError(f"{key}={game!r} is not an Atari 100k game; {hint}allowed: {', '.join(ATARI_100K_GAMES)}")


def human_normalized(game: str, score: float | np.ndarray) -> float | np.ndarray:
  """The human-normalised score ``(score - random) / (human - random)``: 0 = random, 1 = human.

  Args:
    game: one of :data:`ATARI_100K_GAMES`.
    score: a game score (an episode's undiscounted return), or an array of them.

  Returns:
    The normalised score(s), a float for a scalar ``score``.

  Raises:
    InputError: ``game`` is not an Atari 100k game.
  """
  check_atari_100k_game(game)
  low, high = RANDOM_SCORES[game], HUMAN_SCORES[game]
  out = (np.asarray(score, np.float64) - low) / (high - low)
  return float(out) if np.ndim(out) == 0 else out


def iqm_with_ci(scores: Mapping[str, np.ndarray], reps: int = BOOTSTRAP_REPS, seed: int = 0,
                confidence: float = 0.95, games: Sequence[str] | int | None = None) -> dict[str, dict[str, float]]:
  """IQM and its stratified-bootstrap confidence interval per variant (rliable).

  The IQM is the mean of the middle 50% of all ``runs x games`` scores (``scipy.stats.trim_mean``
  cutting 25% each side, rliable's ``metrics.aggregate_iqm``); the interval resamples runs with
  replacement within each game (``library.get_interval_estimates``, percentile interval), as
  Agarwal et al. (2021) report Atari 100k.

  Args:
    scores: ``{variant: [runs, games]}`` (e.g. human-normalised scores); one column is a plain
      bootstrap over runs. Variants may differ in runs, not in games.
    reps: bootstrap replicates, >= 1.
    seed: seeds numpy's global generator, which rliable draws from (its state is restored after).
    confidence: of the interval.
    games: the games of the columns (their names, or their count). With it, an array whose rows
      are the games (``[games, runs]``) is refused naming its transpose. Without it, an array of
      26 rows (Atari 100k's game count) and another number of columns reads either way and is
      refused: pass ``games``, or ``scores.T``.

  Returns:
    ``{variant: {"iqm", "ci_low", "ci_high", "runs", "games"}}``; ``ci_low`` / ``ci_high`` are NaN
    for a variant of one run (resampling one run gives it back every time: a zero-width interval
    that is no confidence interval).

  Raises:
    InputError: a variant's scores are not a non-empty finite ``[runs, games]`` array, or their
      axes are given in the other order (or cannot be told apart), or ``reps`` < 1.
  """
  with optional_imports(f"{__name__}.iqm_with_ci"):
    from rliable import library, metrics  # noqa: PLC0415 - the rl extra

  check(len(scores) > 0, "iqm_with_ci got no variants; pass {variant: [runs, games] scores}")
  check_int(reps, "iqm_with_ci: reps", 1, "bootstrap replicates")
  check(games is None or (is_int(games) and games >= 1) or (isinstance(games, (list, tuple)) and len(games) > 0),
        f"iqm_with_ci: games={games!r}; must be the columns' games (a list of names) or their count (an int >= 1)")
  n_games = None if games is None else (int(games) if is_int(games) else len(games))
  arrays = {}
  for name, value in scores.items():
    a = np.asarray(value, np.float64)
    check(a.ndim == 2 and a.size > 0, f"scores[{name!r}] has shape {a.shape}; must be [runs, games], non-empty")
    check(bool(np.all(np.isfinite(a))), f"scores[{name!r}] has non-finite values; IQM needs finite scores")
    _check_axes(name, a.shape, n_games)
    arrays[name] = a
  columns = {a.shape[1] for a in arrays.values()}
  check(len(columns) == 1, f"variants have {sorted(columns)} games; all must score the same games")
  check(0 < confidence < 1, f"confidence={confidence!r}; must be in (0, 1)")
  aggregate = lambda x: np.array([metrics.aggregate_iqm(x)])  # noqa: E731
  saved = np.random.get_state()
  np.random.seed(seed)
  try:
    point, interval = library.get_interval_estimates(arrays, aggregate, reps=reps, confidence_interval_size=confidence)
  finally:
    np.random.set_state(saved)
  one_run = lambda a: a.shape[0] < 2  # noqa: E731
  return {name: {"iqm": float(point[name][0]),
                 "ci_low": float("nan") if one_run(a) else float(interval[name][0, 0]),
                 "ci_high": float("nan") if one_run(a) else float(interval[name][1, 0]),
                 "runs": int(a.shape[0]), "games": int(a.shape[1])}
          for name, a in arrays.items()}


def _check_axes(name: str, shape: tuple[int, ...], games: int | None) -> None:
  """Refuses ``[games, runs]`` scores where the game count says so, and the shape that reads either way."""
  rows, columns = shape
  if games is not None:
    check(columns == games or rows != games,
          f"scores[{name!r}] has shape {shape}: its rows are the {games} games (games={games}); "
          f"must be [runs, games]: pass scores[{name!r}].T")
    check(columns == games, f"scores[{name!r}] has shape {shape}; must be [runs, {games}] (games={games})")
  else:
    check(rows != len(ATARI_100K_GAMES) or columns == rows,
          f"scores[{name!r}] has shape {shape}: {rows} rows read as Atari 100k's {rows} games of {columns} runs or "
          f"as {rows} runs of {columns} games; must be [runs, games]: pass games= (the columns' games) to confirm, "
          f"or scores[{name!r}].T")
