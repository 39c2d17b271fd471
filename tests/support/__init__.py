"""What the tests share and pytest does not collect: helpers, fixtures' bodies, data writers.

A test module imports from here (or asks for a fixture of a ``conftest.py``), never from another test
module or a ``conftest.py``: ``tests/test_suite_rules.py`` checks it.
"""
