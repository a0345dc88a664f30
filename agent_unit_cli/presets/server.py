"""``server``: a self-contained folder that runs with ``python main.py`` (uvicorn), on any host with Python."""

from . import Preset

preset = Preset(
    name="server",
    description="A Python server: .output/server/main.py with its dependencies vendored.",
    output=".output/server",
    runs_on="any machine with Python (uvicorn)",
    storage="any (default: SQLite file in the working directory)",
    templates=("server",),
    run="python {output}/main.py",
)
