"""``server``: a self-contained folder that runs with ``python main.py`` (uvicorn), on any host with Python."""

from . import BuildOptions, Preset, Start

START = "import main\nassert main.app is not None"
"""What ``python main.py`` does before it serves: import the entry and create the app."""


SERVER_REQUIREMENTS = (
    'httptools; platform_python_implementation == "CPython"',
    'uvloop; sys_platform != "win32" and platform_python_implementation == "CPython"',
)
"""What a built server runs faster with where the platform has wheels; uvicorn picks both up by itself.

Measured on a quiet 2-core VM (``bench/http/servers.py``, the same build with and without each,
rounds alternating and taking turns to go first, each over a store of its own): httptools took 15%
off the server's CPU per run streamed to a pause against h11, and made the first SSE event sooner.
uvloop on top: in two runs 8 to 9% more runs to a pause and resumes per second, for 7 to 9% less
CPU each; in a third, the same within 3%; never slower, the first SSE event no later (14 MB more in
a build). Windows and PyPy go without them. The protocol is ``HttpToolsHeadWithBody`` where
httptools is there (:mod:`agent_unit.hosts.uvicorn_http`).
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
