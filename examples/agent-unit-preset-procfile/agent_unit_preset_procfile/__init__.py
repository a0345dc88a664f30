"""``--preset procfile``: the server build for a platform that installs requirements.txt and runs
a Procfile (Heroku, Render, Railway, Dokku), published as a third-party preset.

It reuses agent-unit's own ``server`` template (``main.py``) and adds its own ``procfile``
templates from this package. The platform installs the packages, so nothing is vendored: the
build lists them in ``requirements.txt`` at the versions it was tested with.
"""

from __future__ import annotations

from typing import Any

from agent_unit_cli.presets import BuildOptions, Preset

__all__ = ["preset"]


def check(config: Any, options: BuildOptions) -> None:
    """The platform picks the machine and installs the wheels for it: nothing here to choose."""
    if options.arch is not None:
        raise ValueError(f"--arch {options.arch}: the platform installs requirements.txt for its own machines")


preset = Preset(
    name="procfile",
    description="A Procfile app: main.py, app/, requirements.txt and Procfile, for the platform to install.",
    output=".output/procfile",
    runs_on="Heroku, Render, Railway, Dokku (the platform installs requirements.txt)",
    storage="a shared store (Redis, Postgres): the platform's disk does not outlive a deploy",
    templates=("server", "procfile"),  # agent-unit's main.py, then this package's files
    template_package="agent_unit_preset_procfile",
    run="git push the folder {output} to the platform (it runs the Procfile's web process)",
    vendors=False,
    check=check,
    runs_tasks="the web process's in-process scheduler (each tick claimed once in the store)",
)
