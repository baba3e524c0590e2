"""Statistical validation of a built world (``python -m pipeline.validate``).

Every check reports the measured figure beside its target and an explicit
tolerance derived from the figure's standard error at the world's scale.
"""
