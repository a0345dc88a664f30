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
    # uvicorn parses HTTP with httptools when it is there (measured: 15% less server CPU per run
    # streamed to a pause than h11, and a faster first SSE event); CPython has its wheels.
    # uvloop is left out: it made the first SSE event slower here, for no CPU saved.
    requirements=('httptools; platform_python_implementation == "CPython"',),
)
