"""Fixtures every test module can use without importing them.

They live in the helper modules beside this file and are registered here as plugins:

- ``tests/sshd.py``: ``sshd_factory``, ``sshd`` (real OpenSSH servers on loopback);
- ``tests/images.py``: ``docker_engine``, ``debian_image``, ``busybox_image`` (session),
  ``remote_engine`` (a second dockerd), ``local_registry`` (a registry on loopback);
- ``tests/labfixtures.py``: ``sim_lab`` (session), the simulated lab (harness/lab) with three hosts;
- ``tests/historyfixtures.py``: ``postgres_server`` (session, a real PostgreSQL cluster), ``history_url``
  (a fresh history on SQLite and on PostgreSQL), and every test's own ``$TT_HARNESS_HISTORY``.

Plain helpers (``tests/hosttree.py``, ``tests/jobspec.py``, ``tests/hostile.py``,
``tests/paths.py``, and the functions of the two modules above) are imported where they are used;
no test module imports another test module.
"""

pytest_plugins = ["tests.sshd", "tests.images", "tests.labfixtures", "tests.historyfixtures"]
