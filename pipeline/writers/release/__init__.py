"""Writers of the release bundle's files."""
