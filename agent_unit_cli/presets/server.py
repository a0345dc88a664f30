"""``server``: a self-contained folder that runs with ``python main.py`` (uvicorn), on any host with Python."""

from . import BuildOptions, Preset, Start

START = "import main\nassert main.app is not None"
"""What ``python main.py`` does before it serves: import the entry and create the app."""


SERVER_REQUIREMENTS = (
    'httptools; platform_python_implementation == "CPython"',
    'uvloop; sys_platform != "win32" and platform_python_implementation == "CPython"',
)
"""What a built server runs faster with where the platform has wheels; uvicorn picks both up by itself.

Measured on a quiet 2-core VM against the same server without them (``bench/http/servers.py``):
httptools took 15% off the server's CPU per run streamed to a pause and made the first SSE event
sooner than h11; uvloop on top gave 10% more runs and resumes per second for 11% less CPU each, with
the first SSE event no later. Windows and PyPy go without them (no wheels), on the same code.
"""


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
    requirements=SERVER_REQUIREMENTS,
)
