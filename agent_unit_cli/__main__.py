"""``python -m agent_unit_cli``: the same as the ``agent-unit`` command."""

from .main import main

main()
