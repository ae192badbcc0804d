"""Errors raised while reading catalog data; messages name the file and the field."""


class CatalogError(ValueError):
    """Bad catalog input. ``str(err)`` is one line naming the file, the field and the fix."""
