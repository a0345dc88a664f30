"""The ``agent-unit`` command: discovery, builds and dev server (never shipped in a build)."""
