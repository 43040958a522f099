// Per-call cost of the plugin's experimental.chat.system.transform hook under Node.
// Usage: node plugin_overhead.mjs <compiled llmem.js> <scratch dir> <calls> <context bytes>
// Prints one JSON object on stdout: {cases: {name: [ms per call, ...]}, bytes, node}.
// Every case runs `warmup` untimed calls first; only the hook call itself is timed
// (rewriting the file in the "changed" case happens between the timed calls, with a
// session.compacted event that unpins the session's block so the call reads the file again).
import fs from "node:fs"
import path from "node:path"
import { pathToFileURL } from "node:url"

const [pluginPath, scratch, callsArg, bytesArg] = process.argv.slice(2)
const calls = Number.parseInt(callsArg ?? "1000", 10)
const bytes = Number.parseInt(bytesArg ?? "6000", 10)
const warmup = 100
const home = path.join(scratch, "llmem")
const ctx = path.join(home, "context")
process.env.LLMEM_HOME = home
fs.mkdirSync(ctx, { recursive: true })

const mod = await import(pathToFileURL(pluginPath).href)
const Plugin = Object.values(mod)[0]
const hooks = await Plugin(
  { directory: scratch, worktree: scratch },
  { context_dir: ctx, autostart: false, wait_ms: 300, log: path.join(home, "logs", "plugin.log") },
)
const transform = hooks["experimental.chat.system.transform"]

const line = "- [fact] the staging api deploys with `make deploy-staging` after CI is green\n"
const body = (tag) => {
  let text = `# Memory (${tag})\n\n`
  while (text.length < bytes) text += line
  return text.slice(0, bytes - 1) + "\n"
}
const sys = () => ({ system: ["BASE PROMPT"] })

const timeCalls = async (sid, n, before) => {
  const out = []
  for (let i = 0; i < n; i++) {
    if (before) before(i)
    const o = sys()
    const t0 = performance.now()
    await transform({ sessionID: sid }, o)
    out.push(performance.now() - t0)
    if (o.system.length !== 2) throw new Error(`no context injected for ${sid} (call ${i})`)
  }
  return out
}

// cached: the file does not change between calls (stat + cache hit)
const cachedFile = path.join(ctx, "ses_bench_cached.md")
fs.writeFileSync(cachedFile, body("cached"))
await timeCalls("ses_bench_cached", warmup)
const cached = await timeCalls("ses_bench_cached", calls)

// changed: the file is rewritten (new content, new size, new mtime) before every call
const changedFile = path.join(ctx, "ses_bench_changed.md")
const variants = [body("A"), body("B") + "x\n"]
let stamp = Date.now() / 1000
const rewrite = (i) => {
  fs.writeFileSync(changedFile, variants[i % 2])
  stamp += 1
  fs.utimesSync(changedFile, stamp, stamp)
  // a session's block is pinned until it is compacted: unpin it so the call reads the file
  hooks.event({ event: { type: "session.compacted", properties: { sessionID: "ses_bench_changed" } } })
}
rewrite(0)
await timeCalls("ses_bench_changed", warmup, rewrite)
const changed = await timeCalls("ses_bench_changed", calls, rewrite)

console.log(JSON.stringify({ cases: { cached, changed }, bytes, node: process.version }))
