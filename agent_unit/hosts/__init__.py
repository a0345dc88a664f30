"""Entry shims the serverless builds use: one module per host, each imported only by its build."""
