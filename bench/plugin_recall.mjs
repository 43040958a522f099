// Per-prompt cost of the plugin's chat.message hook (recall) under Node, and the blocks it adds.
// Usage: node plugin_recall.mjs <compiled llmem.js> <scratch dir> <socket> <prompts.json> <per session>
// prompts.json: [{"text": ..., "kind": ...}, ...]. Runs every prompt twice: against the
// sidecar listening on <socket> ("service"), then against an NDJSON server in this process
// that answers a fixed block at once ("floor": the plugin's own cost plus one round trip).
// Prints one JSON object: {service: [{ms, chars, kind}], floor: [ms...], node}.
import fs from "node:fs"
import net from "node:net"
import path from "node:path"
import { pathToFileURL } from "node:url"

const [pluginPath, scratch, socket, promptsPath, perSessionArg] = process.argv.slice(2)
const prompts = JSON.parse(fs.readFileSync(promptsPath, "utf8"))
const perSession = Number.parseInt(perSessionArg ?? "8", 10)
const home = path.join(scratch, "llmem")
process.env.LLMEM_HOME = home
fs.mkdirSync(home, { recursive: true })
const Plugin = Object.values(await import(pathToFileURL(pluginPath).href))[0]
const options = (sock) => ({
  socket: sock, autostart: false, wait_ms: 0, tools: false, recall_timeout_ms: 2000,
  context_dir: path.join(home, "context"), log: path.join(home, "logs", "plugin.log"),
})

const run = async (sock, tag) => {
  const hooks = await Plugin({ directory: scratch, worktree: scratch }, options(sock))
  const out = []
  for (let i = 0; i < prompts.length; i++) {
    const sid = `ses_${tag}${Math.floor(i / perSession)}`
    const mid = `msg_${tag}${i}`
    const output = {
      message: { id: mid, sessionID: sid, role: "user" },
      parts: [{ id: `prt_${String(i).padStart(12, "0")}aaaaaaaaaaaaaa`, sessionID: sid, messageID: mid, type: "text", text: prompts[i].text }],
    }
    const t0 = performance.now()
    await hooks["chat.message"]({ sessionID: sid }, output)
    const ms = performance.now() - t0
    out.push({ ms, chars: output.parts.length > 1 ? output.parts[1].text.length : 0, kind: prompts[i].kind })
  }
  return out
}

await run(socket, "warm") // warm both sides (JIT, the service's caches) on other sessions
const service = await run(socket, "s")

const BLOCK = "<llmem-recall>\n" + "- [1a2b3c4d] (fact, 2026-01-02) the staging api deploys with make deploy-staging\n".repeat(4) + "</llmem-recall>"
const floorSock = path.join(scratch, "floor.sock")
const server = net.createServer((conn) => {
  let buf = ""
  conn.on("data", (d) => {
    buf += d
    const nl = buf.indexOf("\n")
    if (nl < 0) return
    const req = JSON.parse(buf.slice(0, nl))
    conn.write(JSON.stringify({ v: 1, id: req.id, result: { block: BLOCK, ids: [], tokens: 80 } }) + "\n")
  })
})
await new Promise((r) => server.listen(floorSock, r))
await run(floorSock, "fw")
const floor = (await run(floorSock, "f")).map((r) => r.ms)
await new Promise((r) => server.close(r))
const logFile = path.join(home, "logs", "plugin.log")
const problems = fs.existsSync(logFile) ? fs.readFileSync(logFile, "utf8").split("\n").filter((l) => l.includes("recall ")).length : 0
console.log(JSON.stringify({ service, floor, problems, node: process.version }))
