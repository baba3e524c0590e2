"""The JSON Schemas, installed as the package data ``pipeline.schemas`` (setup.py maps this
folder there; ``pipeline.paths.SCHEMA_DIR`` finds it in a wheel, an editable install or a
checkout).  This file makes the folder importable as ``pipeline.schemas`` so that
``importlib.resources`` resolves it in an editable install too."""
