"""DrugTargetWorld: synthetic population biobanks with a hidden causal ground truth."""

__version__ = "0.1.0"
# Version of the on-disk layout of a release and of the sealed bundle.  Bump when a
# file, column or key changes meaning; readers check it.
FORMAT_VERSION = "1"
