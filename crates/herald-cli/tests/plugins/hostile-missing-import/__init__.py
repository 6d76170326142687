"""A plugin that imports a module that does not exist (it fails to load)."""

import no_such_module_for_herald  # noqa: F401


def register(ctx):
    pass
