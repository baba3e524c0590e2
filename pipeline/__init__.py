"""DrugTargetWorld: synthetic population biobanks with a hidden causal ground truth."""

__version__ = "0.1.0"
# The on-disk layout of a release and of the sealed bundle has one version, kept with
# the rest of that contract in pipeline.bundle (readers check it); re-exported here.
from .bundle import FORMAT_VERSION  # noqa: E402

__all__ = ["FORMAT_VERSION", "__version__"]
