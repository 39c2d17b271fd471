"""jaxlab's one way to warn: jaxlab.errors.warn, pointing at the caller's line outside jaxlab, shown
by the command line as one line (``jaxlab: warning: ...``); other warnings are left as they are."""

import io
import warnings

import jax
import jax.numpy as jnp
import pytest

from jaxlab.errors import JaxlabRuntimeWarning, JaxlabWarning, one_line_warnings, warn
from jaxlab.optim import momo


def test_a_warning_from_inside_jaxlab_points_at_the_callers_line():
  x = jnp.ones(3)
  loss, g = jax.value_and_grad(lambda x: jnp.sum(x**2))(x)
  frozen = momo(lower_bound=5.0)
  with pytest.warns(JaxlabRuntimeWarning) as seen:
    frozen.update(g, frozen.init(x), x, value=loss)  # MoMo warns three calls deep inside jaxlab
  (w,) = seen
  assert issubclass(w.category, RuntimeWarning) and issubclass(w.category, JaxlabWarning)
  assert w.filename == __file__, w.filename  # the user's line, not jaxlab's


def test_the_command_lines_form_is_one_line_and_leaves_other_warnings_alone(monkeypatch):
  before = []  # what showed warnings before: it still shows every other warning
  monkeypatch.setattr(warnings, "showwarning", lambda message, category, *args, **kwargs: before.append(category))
  one_line_warnings()
  one_line_warnings()  # installing twice wraps once
  out = io.StringIO()
  warnings.showwarning("resuming with changed num_steps", JaxlabWarning, "x.py", 3, file=out)
  warnings.showwarning("something else", UserWarning, "x.py", 3, file=out, line="source()")
  assert out.getvalue() == "jaxlab: warning: resuming with changed num_steps\n" and before == [UserWarning]
  one_line_warnings(show=False)  # a process other than 0 of a multi-process run
  out = io.StringIO()
  warnings.showwarning("said by process 0", JaxlabRuntimeWarning, "x.py", 3, file=out)
  warnings.showwarning("something else", UserWarning, "x.py", 3, file=out)
  assert out.getvalue() == "" and before == [UserWarning, UserWarning]


def test_warn_gives_its_category():
  with pytest.warns(JaxlabWarning, match="^a message$"):
    warn("a message")
