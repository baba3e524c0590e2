"""The Hydra configs, installed as the package data ``pipeline.conf`` (setup.py maps this
folder there; ``pipeline.paths.CONF_DIR`` finds it in a wheel, an editable install or a
checkout).  Only the YAML files are configs; this file makes the folder importable as
``pipeline.conf`` so that ``importlib.resources`` resolves it in an editable install too."""
