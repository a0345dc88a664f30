"""``server``: a self-contained folder that runs with ``python main.py`` (uvicorn), on any host with Python."""

from . import BuildOptions, Preset, Start

START = "import main\nassert main.app is not None"
"""What ``python main.py`` does before it serves: import the entry and create the app."""


def start(options: BuildOptions) -> Start:
    return Start(code=START)


preset = Preset(
    name="server",
    description="A Python server: .output/server/main.py with its dependencies vendored.",
    output=".output/server",
    runs_on="any machine with Python (uvicorn)",
    storage="any (default: SQLite file in the working directory)",
    templates=("server",),
    run="python {output}/main.py",
    start=start,
    workers=True,
    runs_tasks="the server's in-process scheduler (each tick claimed once in the store)",
)
