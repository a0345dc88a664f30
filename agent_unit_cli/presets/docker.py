"""``docker``: the server preset plus a Dockerfile, for Cloud Run, Fly, Render or Kubernetes."""

from . import Preset

preset = Preset(
    name="docker",
    description="The server in a container image: the server output plus Dockerfile and .dockerignore.",
    output=".output/docker",
    runs_on="Cloud Run, Fly, Render, Kubernetes",
    storage="any; a shared store (Redis, Postgres) when you run more than one container",
    templates=("server", "docker"),
    run="docker build -t {name} {output} && docker run -p 3000:3000 {name}",
    notes=("The default SQLite store lives inside the container: mount a volume at /app/.agent-unit to keep runs.",),
)
