from workers import WorkerEntrypoint

from agent_unit.hosts.cloudflare import create_worker


def load_agents():  # called at the first request: Workers limit start-up time
    from agents.refund import agent

    return {"refund": agent}


worker = create_worker(load_agents, budget="10m")
AgentUnitRun = worker.AgentUnitRun  # bound as AGENT_UNIT_RUNS
AgentUnitIndex = worker.AgentUnitIndex  # bound as AGENT_UNIT_INDEX


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await worker.fetch(request, self.env, self.ctx)
