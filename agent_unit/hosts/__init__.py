"""Entry shims the serverless builds use: one module per host (Cloudflare's is a package of its own,
:mod:`agent_unit.hosts.cloudflare`), each imported only by its build and each exposing its
:class:`~agent_unit.Host` (``server.HOST``, ``aws_lambda.lambda_host``, ``vercel.vercel_host``,
``cloudflare.HOST``), and :mod:`~agent_unit.hosts.continuation`, how they (and a host of your own)
continue yielded runs."""
