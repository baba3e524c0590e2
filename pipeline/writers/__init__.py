"""Writers of the release and sealed bundles."""
