// A JavaScript Worker on workerd (through Miniflare, from the wrangler npm package) with a real
// D1 binding, serving the D1 API over HTTP to the tests: POST /all, /run, /batch, /reset.
const { Miniflare } = await import(process.env.MINIFLARE);

const script = `
function bound(env, item) {
  const statement = env.DB.prepare(item.sql);
  return item.params.length ? statement.bind(...item.params) : statement;
}
const TABLES = ["runs", "journal", "events", "state", "ticks", "guard"];
export default {
  async fetch(request, env) {
    const path = new URL(request.url).pathname;
    try {
      if (path === "/reset") {
        await env.DB.batch(TABLES.map((name) => env.DB.prepare("DROP TABLE IF EXISTS " + name)));
        return Response.json({});
      }
      const body = await request.json();
      if (path === "/batch") return Response.json(await env.DB.batch(body.statements.map((item) => bound(env, item))));
      if (path === "/all") return Response.json(await bound(env, body.statements[0]).all());
      if (path === "/run") return Response.json(await bound(env, body.statements[0]).run());
      return new Response("not found", { status: 404 });
    } catch (error) {
      return Response.json({ error: String(error.message) }, { status: 500 });
    }
  },
};
`;

const mf = new Miniflare({ modules: true, script, d1Databases: ["DB"], port: 0 });
const url = await mf.ready;
console.log(url.href);
process.on("SIGTERM", async () => {
  await mf.dispose();
  process.exit(0);
});
