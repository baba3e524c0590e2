"""The package list for setuptools (everything else is in pyproject.toml).

The configs and schemas live at the repository's root, ``conf/`` and ``schemas/`` (the
design card's layout), and install inside the package as ``pipeline/conf`` and
``pipeline/schemas``: a wheel holds them there, and an editable install maps the two
packages to the root folders (``pipeline.paths`` finds them either way).
"""
from setuptools import find_namespace_packages, setup

#: package -> the repository folder it is built from
ROOT_FOLDERS = {"pipeline.conf": "conf", "pipeline.schemas": "schemas"}

packages = find_namespace_packages(include=["pipeline*", "kernels*", "drugtargetworld*"])
for package, folder in ROOT_FOLDERS.items():
    packages += [package, *(f"{package}.{sub}" for sub in find_namespace_packages(where=folder))]

setup(packages=sorted(set(packages)), package_dir=dict(ROOT_FOLDERS))
