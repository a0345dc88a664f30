"""``server``: a self-contained folder that runs with ``python main.py`` (uvicorn), on any host with Python."""

from . import BuildOptions, Preset, Start

START = "import main\nassert main.app is not None"
"""What ``python main.py`` does before it serves: import the entry and create the app."""


SERVER_REQUIREMENTS = ('httptools; platform_python_implementation == "CPython"',)
"""What a built server runs with besides uvicorn: httptools, where CPython has its wheels (uvicorn picks it).

Measured against h11: 15% less server CPU per run streamed to a pause, and a sooner first SSE event.
uvloop is left out: the same build served with and without it, rounds alternating and taking
turns to go first, showed no difference here (``bench/http/servers.py --rounds 6``: runs to a pause
2,440 vs 2,506 per second, resumes 2,574 vs 2,551, the same CPU per operation and first SSE event)
for 14 MB more in every build.
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
