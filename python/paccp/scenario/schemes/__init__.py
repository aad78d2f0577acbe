"""Bandwidth-sharing schemes other than PACCP's own law, each a ``[scheme]`` section of a scenario.

A scheme is one module here with a pydantic model (``kind`` = its name, ``check(scenario)`` for the
cross-field checks) and one registration line in ``SchemeCfg`` of :mod:`paccp.scenario.models`. Scheme
modules import only the scenario's lower modules (:mod:`paccp.scenario.fields`,
:mod:`paccp.scenario.topology`), never :mod:`paccp.scenario.models`, so there is no import circle.
"""
