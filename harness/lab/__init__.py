"""The simulated Wormhole lab: STAND-IN hosts, faults and images for a machine without a card.

There is no Tenstorrent card where this runs. The lab stands in for a room of Wormhole hosts so
that the whole mission (images built from a spec, checks fanned out over SSH, containers mounted
right or wrong, real failures told from environment faults) can be watched and tested anywhere:
``harness lab up`` (harness/cli/lab.py), :class:`harness.lab.sim.SimLab`.
"""

DEFAULT_HOSTS = 3  # sim-wh-01 .. sim-wh-03
