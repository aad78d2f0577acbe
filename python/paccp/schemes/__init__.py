"""Bandwidth-sharing schemes other than PACCP's own law, each a ``[scheme]`` section of a scenario.

A scheme is one module here with a pydantic model (``kind`` = its name, ``check(scenario)`` for the
cross-field checks) and one registration line at the end of :mod:`paccp.scenario`.
"""

# The scheme models use the scenario's field types: import the scenario module first, so that importing a
# scheme module on its own still finds those types defined (the scenario imports the schemes at its end).
import paccp.scenario  # noqa: F401
