"""Cloudflare Workers: what a build's ``src/entry.py`` exports, and what a Worker written by hand can use.

    from workers import WorkerEntrypoint
    from agent_unit.hosts.cloudflare import create_worker

    worker = create_worker(load_agents, crons={"0 8 * * *": ["send-digest"]}, tasks=TASKS)
    AgentUnitRun = worker.AgentUnitRun        # bound as AGENT_UNIT_RUNS
    AgentUnitIndex = worker.AgentUnitIndex    # bound as AGENT_UNIT_INDEX

    class Default(WorkerEntrypoint):
        async def fetch(self, request):
            return await worker.fetch(request, self.env, self.ctx)

        async def scheduled(self, controller, env, ctx):
            await worker.scheduled(controller, self.env, self.ctx)

Every piece of the Cloudflare host lives here, one module each:

- :mod:`.worker_entry`: the Worker (:func:`create_worker`), its handlers and its two runtimes;
- :mod:`.invocation`: the host one request, cron or alarm runs on (:data:`HOST`,
  :func:`cloudflare_host`) and :func:`serve` through the Workers ASGI adapter;
- :mod:`.bindings`: the Worker's ``env`` as the mapping :data:`agent_unit.env.env` reads;
- :mod:`.forward`: a request sent to its run's Durable Object, read retries included;
- :mod:`.durable_objects_runtime`: the Durable Object classes, one object per run plus an index;
- :mod:`.durable_objects_store`: the store protocol over those objects;
- :mod:`.d1_store`: the store over a D1 database (``storage = "d1://BINDING"``).

The build's side (``agent-unit build --preset cloudflare``) is ``agent_unit_cli.presets.cloudflare``
and its templates; nothing here imports it.
"""

from __future__ import annotations

from .forward import RETRIES, forward, retryable
from .invocation import HOST, cloudflare_host, hand_to_wait_until, serve
from .worker_entry import SWEEP_TASK, Worker, continue_in_worker, create_worker

__all__ = [
    "HOST",
    "RETRIES",
    "SWEEP_TASK",
    "Worker",
    "cloudflare_host",
    "continue_in_worker",
    "create_worker",
    "forward",
    "hand_to_wait_until",
    "retryable",
    "serve",
]
