"""The MLIR op-order check (tt-mlir#6119: EraseInverseOps leaves moved ops out of order).

Every op of a tt-xla model carries its original index in its location name
(``loc("DEBUG|15|ResNetModel[resnet]|...|aten__native_batch_norm")``); after the pipeline,
indexed ops must keep non-decreasing index order within each block.

- :mod:`.lexer`: MLIR tokens, strings and their escapes;
- :mod:`.locations`: the ``loc(...)`` grammar and the index in a name;
- :mod:`.aliases`: location aliases and compactly encoded indices;
- :mod:`.reader`: streams MLIR text op by op (``read_module``);
- :mod:`.order`: the check (``check_order``);
- :mod:`.passes`: the first pass that breaks the order, from ``--mlir-print-ir-after-all``
  output (``find_culprit``);
- :mod:`.check`: the verdict for the runner (``judge_pipeline_output``).

A pure core: no Docker, no SSH, nothing from :mod:`harness.execution`.
"""
