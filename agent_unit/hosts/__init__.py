"""Entry shims the serverless builds use: one module per host, each imported only by its build,
and :mod:`~agent_unit.hosts.continuation`, how they (and a host of your own) continue yielded runs."""
