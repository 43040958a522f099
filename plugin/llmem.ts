// llmem-hooks plugin for OpenCode (tested with opencode-ai 1.18.33).
//
// * experimental.chat.system.transform: appends <context_dir>/<sessionID>.md (written by the
//   `llmem-hooks run` sidecar when the session is created) to the system prompt as one extra
//   string. Sub-agent sessions use their parent's file. Before the sidecar has written a new
//   session's file, the query service's `start` gives the same context at once (with the
//   first prompt's recall, from chat.message); only when it does not answer is the file
//   waited for (up to wait_ms), and later calls never wait. Content is cached by mtime.
// * experimental.session.compacting: pushes the resume pack <sessionID>.compact.md into the
//   compaction prompt.
//   The block is pinned per session (the first one read is sent on every later request) so
//   the prompt prefix stays byte-identical and prompt caching survives; it is re-read after
//   the session is compacted (the history is rewritten then anyway).
// * chat.message: asks the query service of the sidecar (`recall` over its Unix socket,
//   time-boxed) for the memories relevant to the new prompt and adds them to the user's
//   message as one synthetic text part (<llmem-recall> ... </llmem-recall>). Stored with the
//   message, the block is part of the history: every earlier byte of the prompt stays the
//   same from turn to turn. No answer in time: no block (fail open).
// * tool.execute.after: after a read / edit / write / multiedit / patch tool call, asks the
//   query service (`file_recall`, time-boxed by recall_timeout_ms) what memory knows about
//   the file (memories citing it, episodes that touched it; once per file per session) and
//   appends that block to the tool's output, which is what the model reads next (the tool
//   result part of the next request). No answer in time: the output is left as it was.
// * tool: memory_search, memory_remember, memory_forget, memory_get, memory_timeline, each
//   one call to the query service with compact results.
// * At start: launches the sidecar (detached) unless one is running.
//
// Settings come from <LLMEM_HOME>/plugin.json (written by `llmem-hooks install opencode`),
// LLMEM_HOME being $LLMEM_HOME or ~/.config/llmem. The plugin never throws into OpenCode and
// never prints; problems go to the log file. Memory is written only through the service
// (memory_remember / memory_forget), which redacts and scopes as everything else does.
//
// OpenCode requires every export of a plugin module to be a plugin function, so the helpers
// below stay module-private.
import type { Hooks, Plugin, ToolContext, ToolDefinition } from "@opencode-ai/plugin"
import { spawn } from "node:child_process"
import fs from "node:fs"
import net from "node:net"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"

type Settings = {
  context_dir: string
  wait_ms: number
  autostart: boolean
  command: string[]
  log: string
  socket: string
  recall: boolean
  recall_timeout_ms: number
  tools: boolean
  tool_timeout_ms: number
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type Reply = { ok: true; result: Json } | { ok: false; error: string; unreachable: boolean }
type ArgSpec = {
  kind: "string" | "integer" | "string[]" | "boolean"
  description: string
  optional?: boolean
  minimum?: number
  maximum?: number
  values?: string[] // the allowed values (the installed copy lists the memory types)
}

type Cached = { mtimeMs: number; size: number; text: string }

const POLL_MS = 20
const PROTOCOL = 1
const MAX_REPLY_BYTES = 1 << 20 // a reply larger than this is cut off and counted as an error
const RESTART_EVERY_MS = 60_000 // an unreachable service restarts the sidecar at most this often
const REPLAYS_KEPT = 256 // message id -> recall block, for a message that is handled again
const RECALL_PROMPT_CHARS = 4000 // the prompt text sent to `recall`, at most
const SUN_PATH_MAX = 107 // bytes an AF_UNIX path may hold (108 with the NUL on Linux)
const SESSION_ID = /^[A-Za-z0-9_-]{1,256}$/
const SOCKET_WAIT_MS = 1500 // a sidecar that is starting gets this long to open its socket
const SOCKET_POLL_MS = 50
const STARTING_MS = 15_000 // a sidecar spawned this recently counts as still coming up
// OpenCode's title request (the small model) runs system.transform too: its system prompt
// starts with this. Memory goes only into the main conversation.
const TITLE_PROMPT = "You are a title generator"
const MAX_PARENT_DEPTH = 8

// Always absolute (a relative $LLMEM_HOME is taken against the current directory once),
// and handed as such to the sidecar we start, whose working directory differs from ours.
const llmemHome = (): string => {
  const env = process.env.LLMEM_HOME
  if (env) return path.resolve(env === "~" || env.startsWith("~/") ? path.join(os.homedir(), env.slice(1)) : env)
  return path.join(os.homedir(), ".config", "llmem")
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v)

const loadSettings = (home: string, options: unknown): { settings: Settings; problem?: string } => {
  const settings: Settings = {
    context_dir: path.join(home, "context"),
    wait_ms: 300,
    autostart: true,
    command: ["llmem-hooks", "run"],
    log: path.join(home, "logs", "plugin.log"),
    socket: path.join(home, "query.sock"),
    recall: true,
    recall_timeout_ms: 250,
    tools: true,
    tool_timeout_ms: 3000,
  }
  let problem: string | undefined
  let raw: unknown = {}
  try {
    raw = JSON.parse(fs.readFileSync(path.join(home, "plugin.json"), "utf8"))
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") problem = `plugin.json ignored: ${String(err)}`
  }
  for (const source of [raw, options]) {
    if (!isObject(source)) continue
    if (typeof source.context_dir === "string" && source.context_dir) settings.context_dir = source.context_dir
    if (typeof source.wait_ms === "number" && source.wait_ms >= 0) settings.wait_ms = source.wait_ms
    if (typeof source.autostart === "boolean") settings.autostart = source.autostart
    if (typeof source.log === "string" && source.log) settings.log = source.log
    if (typeof source.socket === "string" && source.socket) settings.socket = source.socket
    if (typeof source.recall === "boolean") settings.recall = source.recall
    if (typeof source.tools === "boolean") settings.tools = source.tools
    for (const key of ["recall_timeout_ms", "tool_timeout_ms"] as const) {
      const v = source[key]
      if (typeof v === "number" && v > 0 && v <= 60_000) settings[key] = v
    }
    const cmd = source.command
    if (Array.isArray(cmd) && cmd.length > 0 && cmd.every((c) => typeof c === "string" && c)) {
      settings.command = cmd as string[]
    }
  }
  return { settings, problem }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

// -- the query service (NDJSON over the sidecar's Unix socket) ------------------------------

let nextRequestId = 0

// Why the socket at `socketPath` is not ours to talk to, or null. Node cannot ask the
// listener's uid (SO_PEERCRED), so: the socket file must be ours, in a folder that is ours
// and that nobody else can write (no one could have swapped it). Anything else gets no
// prompt (docs/security.md, "Socket trust").
const untrustedSocket = (socketPath: string): string | null => {
  const uid = typeof process.getuid === "function" ? process.getuid() : null
  if (uid === null) return null
  let sock: fs.Stats
  let dir: fs.Stats
  try {
    sock = fs.lstatSync(socketPath)
    dir = fs.lstatSync(path.dirname(socketPath))
  } catch {
    return null // nothing there: the connect below fails as unreachable
  }
  if (!sock.isSocket() || sock.uid !== uid) return `${socketPath} is not a socket of ours (owner uid ${sock.uid})`
  if (!dir.isDirectory() || dir.uid !== uid || (dir.mode & 0o022) !== 0) {
    return `${path.dirname(socketPath)} is not a folder only we can write`
  }
  return null
}

// One request on a fresh connection, answered by one line, within `timeoutMs`. Never
// rejects: every failure is a Reply with ok false (`unreachable` when nothing listens).
const callService = (socketPath: string, method: string, params: Record<string, Json>, timeoutMs: number): Promise<Reply> =>
  new Promise<Reply>((resolve) => {
    const distrust = untrustedSocket(socketPath)
    if (distrust) {
      resolve({ ok: false, error: `untrusted query socket, nothing sent: ${distrust}`, unreachable: false })
      return
    }
    const id = ++nextRequestId
    const chunks: Buffer[] = []
    let size = 0
    let done = false
    const finish = (reply: Reply): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      closeDir()
      sock.destroy()
      resolve(reply)
    }
    // A deep LLMEM_HOME makes a path longer than AF_UNIX allows: reach the same file
    // through a descriptor of its folder (as the server binds it; docs/query-service.md).
    let dirFd: number | null = null
    const closeDir = (): void => {
      if (dirFd === null) return
      try {
        fs.closeSync(dirFd)
      } catch {
        // already closed
      }
      dirFd = null
    }
    let target = socketPath
    if (Buffer.byteLength(socketPath) >= SUN_PATH_MAX) {
      try {
        dirFd = fs.openSync(path.dirname(socketPath), fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
        target = `/proc/self/fd/${dirFd}/${path.basename(socketPath)}`
      } catch {
        closeDir() // connect below fails with a clear error
      }
    }
    const timer = setTimeout(
      () => finish({ ok: false, error: `no answer within ${timeoutMs} ms`, unreachable: false }),
      timeoutMs,
    )
    const sock = net.createConnection({ path: target })
    sock.on("connect", () => {
      closeDir()
      sock.write(JSON.stringify({ v: PROTOCOL, id, method, params }) + "\n")
    })
    sock.on("data", (chunk: Buffer) => {
      const nl = chunk.indexOf(10)
      chunks.push(nl < 0 ? chunk : chunk.subarray(0, nl))
      size += chunk.length
      if (nl < 0) {
        if (size > MAX_REPLY_BYTES) finish({ ok: false, error: "reply too large", unreachable: false })
        return
      }
      let msg: unknown
      try {
        msg = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      } catch {
        finish({ ok: false, error: "reply is not JSON", unreachable: false })
        return
      }
      if (!isObject(msg) || msg.v !== PROTOCOL || msg.id !== id) {
        finish({ ok: false, error: "reply of another protocol version or request", unreachable: false })
      } else if (isObject(msg.error)) {
        const code = typeof msg.error.code === "string" || typeof msg.error.code === "number" ? `${msg.error.code}: ` : ""
        finish({ ok: false, error: `${code}${String(msg.error.message ?? "error")}`, unreachable: false })
      } else if ("result" in msg) {
        finish({ ok: true, result: msg.result as Json })
      } else {
        finish({ ok: false, error: "reply without result", unreachable: false })
      }
    })
    sock.on("error", (err: NodeJS.ErrnoException) => {
      const unreachable = err.code === "ENOENT" || err.code === "ECONNREFUSED" || err.code === "ENOTSOCK"
      finish({ ok: false, error: String(err), unreachable })
    })
    sock.on("close", () => finish({ ok: false, error: "connection closed without an answer", unreachable: false }))
  })

// -- the synthetic recall part -------------------------------------------------------------

const RECALL_OPEN = "<llmem-recall>\n"
const RECALL_CLOSE = "\n</llmem-recall>"
// A tag of ours (or an agent's wrapper) inside a block, as it would read: the service
// defuses them (llmem_hooks/markers.py); a block that still holds one is not passed on.
const TAG_INSIDE = /<[\s/]*(?:l[^\w<>\n]{0,3}){1,3}(?:m|rn)[^\w<>\n]{0,3}e[^\w<>\n]{0,3}(?:m|rn)|<[\s/]*system[^\w<>\n]{0,3}_?[^\w<>\n]{0,3}reminder/
const readsAs = (text: string): string =>
  text
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[\u00ad\u200b-\u200f\u2060-\u2064\ufeff\u0300-\u036f]/g, "")
    .replace(/&(?:amp;)*(?:lt|#0*60|#x0*3c);?|%3c|\\(?:u00|x)3c|[‹〈⟨❮❬˂ᐸ⧼《«≺]/g, "<")
    .replace(/&(?:amp;)*(?:sol|#0*47|#x0*2f);?|%2f|\\(?:u00|x)2f|[∕⁄⧸╱⟋\\]/g, "/")
    .replace(/[1i|ӏǀℓіı]/g, "l")

// The block as the service sent it when it has our shape and nothing inside imitates a
// marker; else "" (what we cannot vouch for does not go into the prompt).
const sealRecall = (block: string): string => {
  if (!block.trim()) return ""
  if (!block.startsWith(RECALL_OPEN) || !block.endsWith(RECALL_CLOSE)) return ""
  const inner = block.slice(RECALL_OPEN.length, block.length - RECALL_CLOSE.length)
  return TAG_INSIDE.test(readsAs(inner)) ? "" : block
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// A part id in OpenCode's form (prt_ + 12 hex of ms*4096+n + 14 base62) that sorts after
// every part already in the message, so the block follows the user's own text.
const nextPartId = (parts: unknown[]): string => {
  let value = (Date.now() * 4096) % 2 ** 48
  for (const part of parts) {
    const m = isObject(part) && typeof part.id === "string" ? /^prt_([0-9a-f]{12})/.exec(part.id) : null
    if (m) value = Math.max(value, Number.parseInt(m[1], 16) + 1)
  }
  let tail = ""
  for (let i = 0; i < 14; i++) tail += BASE62[Math.floor(Math.random() * 62)]
  return `prt_${(value % 2 ** 48).toString(16).padStart(12, "0")}${tail}`
}

// The user's own words in a new message (synthetic and ignored parts are not theirs).
const promptText = (parts: unknown[]): string =>
  parts
    .filter((p) => isObject(p) && p.type === "text" && !p.synthetic && !p.ignored && typeof p.text === "string")
    .map((p) => (p as { text: string }).text)
    .join("\n")
    .trim()

// -- recall for the file in hand -----------------------------------------------------------

const FILE_TOOLS = new Set(["read", "edit", "write", "multiedit", "patch", "apply_patch"])
const PATCH_HEADER = /^\*\*\* (?:Add|Update|Delete) File: (.+)$/gm
const MAX_FILES_PER_CALL = 5
const MAX_TOOL_PATH = 4096

// The files a tool call read or wrote, as its arguments name them (adapters/opencode.py's rule).
const toolFiles = (tool: string, args: unknown): string[] => {
  if (!FILE_TOOLS.has(tool) || !isObject(args)) return []
  const out: string[] = []
  for (const key of ["filePath", "path"]) {
    const v = args[key]
    if (typeof v === "string" && v.trim() && v.length <= MAX_TOOL_PATH) out.push(v.trim())
  }
  if (typeof args.patchText === "string") for (const m of args.patchText.matchAll(PATCH_HEADER)) out.push(m[1].trim())
  return [...new Set(out)].filter((f) => f && f.length <= MAX_TOOL_PATH).slice(0, MAX_FILES_PER_CALL)
}

// -- agent tools -----------------------------------------------------------------------------

type ToolSpec = { description: string; method: string; args: Record<string, ArgSpec> }

// The five tools' names, descriptions and argument descriptions have one source,
// llmem_hooks/agents/tools.json (the MCP server reads it too). `llmem-hooks install opencode`
// writes it into the installed copy in place of the null below; this file, run from the
// repository or the package, reads it next door. Missing or malformed: no tools (logged).
const INSTALLED_TOOLS: unknown = null // llmem-hooks: tools.json
const TOOL_FILES = ["../agents/tools.json", "../llmem_hooks/agents/tools.json"]
const ARG_KINDS = new Set(["string", "integer", "string[]", "boolean"])
const TOOL_METHODS = new Set(["search", "remember", "forget", "get", "timeline"])

const toolSpecs = (raw: unknown): Record<string, ToolSpec> | null => {
  if (!isObject(raw)) return null
  const out: Record<string, ToolSpec> = {}
  for (const [name, spec] of Object.entries(raw)) {
    if (!/^memory_[a-z]+$/.test(name) || !isObject(spec) || !isObject(spec.args)) return null
    if (typeof spec.description !== "string" || typeof spec.method !== "string" || !TOOL_METHODS.has(spec.method)) return null
    const args: Record<string, ArgSpec> = {}
    for (const [arg, a] of Object.entries(spec.args)) {
      if (!isObject(a) || typeof a.kind !== "string" || !ARG_KINDS.has(a.kind) || typeof a.description !== "string") return null
      args[arg] = { kind: a.kind as ArgSpec["kind"], description: a.description, optional: a.optional === true }
      // "memory_types" (read from the repository's tools.json): any string, the service checks
      if (Array.isArray(a.values) && a.values.length > 0 && a.values.every((v) => typeof v === "string" && v)) {
        args[arg].values = a.values as string[]
      }
      for (const bound of ["minimum", "maximum"] as const) {
        const v = a[bound]
        if (v === undefined) continue
        if (typeof v !== "number" || !Number.isInteger(v)) return null
        args[arg][bound] = v
      }
    }
    out[name] = { description: spec.description, method: spec.method, args }
  }
  return Object.keys(out).length ? out : null
}

const loadToolSpecs = (): { specs: Record<string, ToolSpec> | null; problem?: string } => {
  if (INSTALLED_TOOLS !== null) {
    const specs = toolSpecs(INSTALLED_TOOLS)
    return specs ? { specs } : { specs, problem: "tools: the installed tool wording is malformed" }
  }
  let here = ""
  try {
    here = path.dirname(fileURLToPath(import.meta.url))
  } catch {
    return { specs: null, problem: "tools: cannot locate the plugin file to find tools.json" }
  }
  for (const rel of TOOL_FILES) {
    const file = path.join(here, rel)
    let text: string
    try {
      text = fs.readFileSync(file, "utf8")
    } catch {
      continue
    }
    try {
      const specs = toolSpecs(JSON.parse(text))
      if (specs) return { specs }
    } catch {
      // malformed: said below
    }
    return { specs: null, problem: `tools: ${file} is malformed` }
  }
  return { specs: null, problem: "tools: tools.json not found (reinstall with `llmem-hooks install opencode`)" }
}

// Zod-like enough for what we use of `tool.schema` (typed loosely: it comes from whichever
// zod the user's OpenCode installed).
type SchemaBuilder = {
  string(): { describe(d: string): unknown }
  number(): { int(): { min(n: number): { max(n: number): { describe(d: string): unknown } } } }
  array(item: unknown): { describe(d: string): unknown }
  boolean(): { describe(d: string): unknown }
  enum?(values: [string, ...string[]]): { describe(d: string): unknown }
}

const withOptional = (schema: unknown, optional: boolean | undefined): unknown =>
  optional && isObject(schema) && typeof schema.optional === "function" ? (schema.optional as () => unknown)() : schema

// The tool's args: zod schemas when OpenCode's @opencode-ai/plugin can be imported (the
// documented way), else plain JSON Schema, which OpenCode 1.18.33 also accepts (it then lists
// every argument as required, so optional ones take null too).
const toolArgs = (args: Record<string, ArgSpec>, z: SchemaBuilder | null): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const [name, spec] of Object.entries(args)) {
    if (z) {
      const base =
        spec.kind === "string" && spec.values && typeof z.enum === "function"
          ? z.enum(spec.values as [string, ...string[]]).describe(spec.description)
          : spec.kind === "string"
          ? z.string().describe(spec.description)
          : spec.kind === "integer"
            ? z.number().int().min(spec.minimum ?? 1).max(spec.maximum ?? Number.MAX_SAFE_INTEGER).describe(spec.description)
            : spec.kind === "boolean"
              ? z.boolean().describe(spec.description)
              : z.array(z.string()).describe(spec.description)
      out[name] = withOptional(base, spec.optional)
    } else {
      const type = spec.kind === "string[]" ? "array" : spec.kind
      const schema: Record<string, unknown> = { type: spec.optional ? [type, "null"] : type, description: spec.description }
      if (spec.kind === "string[]") schema.items = { type: "string" }
      if (spec.values) schema.enum = spec.optional ? [...spec.values, null] : spec.values
      if (spec.minimum !== undefined) schema.minimum = spec.minimum
      if (spec.maximum !== undefined) schema.maximum = spec.maximum
      out[name] = schema
    }
  }
  return out
}

const oneLine = (text: unknown, max = 200): string => {
  const flat = String(text ?? "").replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

const day = (v: unknown): string => (typeof v === "string" ? v.slice(0, 10) : "")

// `[id] (type, date) one line` for an entry of a result list.
const entryLine = (e: Json): string => {
  if (!isObject(e)) return oneLine(e)
  const meta = [e.type, day(e.created_at ?? e.at)].filter((x) => typeof x === "string" && x).join(", ")
  const text = e.line ?? e.summary ?? e.content ?? e.text ?? ""
  const mark = e.anchor === true || e.current === true ? "→ " : ""
  // a memory whose cited code changed is still listed, marked (docs/citations.md)
  const stale = e.citation_state === "stale" ? ` [stale: ${oneLine(e.stale_reason ?? "the cited code changed")}]` : ""
  return `${mark}[${String(e.id ?? "?")}]${meta ? ` (${meta})` : ""}${stale} ${oneLine(text)}`
}

// Scoped to the caller's project (ids too: another project's memory needs any_project).
const WITH_DIRECTORY = new Set(["search", "remember", "get", "forget", "timeline"])
const LIST_KEYS = ["results", "items", "memories", "entries", "timeline"]

// Compact text for the agent: lists as one line per entry, full records (get) as a header
// line plus their text, anything else as key: value lines.
const renderResult = (method: string, result: Json): string => {
  if (!isObject(result)) return oneLine(result, 2000)
  if (method === "get") {
    const items = LIST_KEYS.map((k) => result[k]).find(Array.isArray) ?? []
    const blocks = (items as Json[]).map((item) => {
      if (!isObject(item)) return oneLine(item)
      const head = Object.entries(item)
        .filter(([k, v]) => !["content", "text", "id", "full_id"].includes(k) && v !== null && typeof v !== "object")
        .map(([k, v]) => `${k}: ${String(v)}`)
        .join(", ")
      return `[${String(item.id ?? "?")}] ${head}\n${String(item.content ?? item.text ?? "")}`
    })
    const gone = Array.isArray(result.missing) ? result.missing.map((m) => (isObject(m) ? `${String(m.id)} (${String(m.reason ?? "?")})` : String(m))) : []
    const missing = gone.length ? `\nnot found: ${gone.join(", ")}` : ""
    return (blocks.join("\n\n") || "nothing found for those ids") + missing
  }
  for (const key of LIST_KEYS) {
    const list = result[key]
    if (Array.isArray(list)) return list.length ? list.map(entryLine).join("\n") : "no matching memories"
  }
  return Object.entries(result)
    .filter(([, v]) => v !== null && v !== "" && !(Array.isArray(v) && v.length === 0))
    .map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : String(v)}`)
    .join("\n")
}

// A failure the agent can act on: thrown from `execute`, OpenCode shows it as the tool's
// error (one line saying what to do), as MCP's isError.
class ToolFailure extends Error {}

// Tool arguments as the service's params (JSON Schema tools get nulls for left-out ones;
// `ids` may come as one string). A number out of its bounds is an error, not clamped.
const toolParams = (name: string, args: Record<string, unknown>, specs: Record<string, ArgSpec>): Record<string, Json> => {
  const params: Record<string, Json> = {}
  for (const [k, v] of Object.entries(args ?? {})) {
    if (v === null || v === undefined || v === "" || v === false) continue
    if ((k === "ids" || k === "tags") && typeof v === "string") params[k] = v.split(/[\s,]+/).filter(Boolean)
    else params[k] = v as Json
    const spec = specs[k]
    if (spec?.kind === "integer") {
      const n = params[k]
      const low = spec.minimum ?? Number.MIN_SAFE_INTEGER
      const high = spec.maximum ?? Number.MAX_SAFE_INTEGER
      if (typeof n !== "number" || !Number.isInteger(n) || n < low || n > high)
        throw new ToolFailure(`${name}: ${k} must be an integer from ${low} to ${high}, not ${oneLine(JSON.stringify(v), 40)}; fix it and call again`)
    }
  }
  return params
}

export const LlmemPlugin: Plugin = async (pluginInput, options) => {
  const home = llmemHome()
  const { settings, problem } = loadSettings(home, options)

  const log = (msg: string): void => {
    try {
      fs.mkdirSync(path.dirname(settings.log), { recursive: true, mode: 0o700 })
      fs.appendFileSync(settings.log, `${new Date().toISOString()} [plugin ${process.pid}] ${msg}\n`, {
        mode: 0o600,
      })
    } catch {
      // nowhere left to report to; stay silent rather than disturb OpenCode
    }
  }
  if (problem) log(problem)

  // Said once per OpenCode process, where the user looks: the log and a TUI toast (there
  // is no TUI under `opencode run`; the toast then fails quietly).
  let warned = false
  const warnOnce = (msg: string): void => {
    log(msg)
    if (warned) return
    warned = true
    try {
      const tui = (pluginInput as { client?: { tui?: { showToast?: (o: unknown) => Promise<unknown> } } })?.client?.tui
      void tui?.showToast?.({ body: { title: "llmem-hooks", message: msg, variant: "warning" } })?.catch?.(() => {})
    } catch {
      // no toast: the log line stays
    }
  }

  const parents = new Map<string, string>() // child session -> parent session
  const cache = new Map<string, Cached>() // file path -> content at mtime
  const waited = new Set<string>() // sessions whose context file has been waited for once
  const pending = new Map<string, Promise<void>>() // first-call waits in progress
  const pinned = new Map<string, string>() // root session -> the system block it was sent
  const replays = new Map<string, string>() // message id -> its recall block ("" = none)
  // root session -> its start-of-session context from the service's `start` ("" = none),
  // for a session whose context file the sidecar has not written yet
  const started = new Map<string, string>()

  const rootSession = (sid: string): string => {
    let cur = sid
    for (let i = 0; i < MAX_PARENT_DEPTH; i++) {
      const parent = parents.get(cur)
      if (!parent) break
      cur = parent
    }
    return cur
  }

  // Content of `file` (cached by mtime + size), or null when missing / empty.
  const readCached = async (file: string): Promise<string | null> => {
    let st: fs.Stats
    try {
      st = await fs.promises.lstat(file)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") log(`stat ${file}: ${String(err)}`)
      cache.delete(file)
      return null
    }
    if (!st.isFile()) {
      // Never follow a symlink planted in the context folder into the prompt.
      log(`not reading ${file}: not a regular file`)
      cache.delete(file)
      return null
    }
    const hit = cache.get(file)
    if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit.text || null
    let text: string
    try {
      const fh = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
      try {
        text = await fh.readFile("utf8")
      } finally {
        await fh.close()
      }
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === "ELOOP") return null // replaced by a symlink between lstat and open
      if (code !== "ENOENT") throw err
      return null // removed between stat and read
    }
    cache.set(file, { mtimeMs: st.mtimeMs, size: st.size, text: text.trim() ? text : "" })
    return text.trim() ? text : null
  }

  // Poll for `file` every POLL_MS until it exists or `ms` passed.
  const waitFor = async (file: string, ms: number): Promise<void> => {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      try {
        await fs.promises.access(file)
        return
      } catch {
        await sleep(Math.min(POLL_MS, Math.max(1, deadline - Date.now())))
      }
    }
  }

  const contextFor = async (sid: string): Promise<string | null> => {
    const file = path.join(settings.context_dir, `${sid}.md`)
    const text = await readCached(file)
    if (text !== null || waited.has(sid)) {
      waited.add(sid)
      return text
    }
    // First call of this session and no file yet: the service builds the same context at
    // once (`start`), so nobody waits for the sidecar to notice the session.
    let given = started.get(sid)
    if (given === undefined && settings.wait_ms > 0) {
      const reply = await ask("start", { session_id: sid, directory: pluginInput?.directory ?? process.cwd() }, settings.wait_ms)
      if (reply.ok && isObject(reply.result) && typeof reply.result.context === "string") given = reply.result.context
      else log(`start ${sid}: ${reply.ok ? "no context in the reply" : reply.error}; waiting for the file`)
    }
    if (given !== undefined) {
      waited.add(sid)
      return given.trim() ? given : null
    }
    // First call of this session and no file yet: the sidecar may still be writing it.
    let wait = pending.get(sid)
    if (!wait) {
      wait = waitFor(file, settings.wait_ms).finally(() => {
        waited.add(sid)
        pending.delete(sid)
      })
      pending.set(sid, wait)
    }
    await wait
    const late = await readCached(file)
    if (late === null) log(`no context file for ${sid} after ${settings.wait_ms} ms`)
    return late
  }

  const sidecarAlive = (): boolean => {
    let pid: number
    try {
      pid = Number.parseInt(fs.readFileSync(path.join(home, "sidecar.pid"), "utf8").trim(), 10)
    } catch {
      return false
    }
    if (!Number.isInteger(pid) || pid <= 0) return false
    try {
      process.kill(pid, 0)
      return true
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === "EPERM"
    }
  }

  let spawnedAt = 0 // when this process last started a sidecar (0: never)
  const startSidecar = (): void => {
    if (!settings.autostart || sidecarAlive()) return
    fs.mkdirSync(path.dirname(settings.log), { recursive: true, mode: 0o700 })
    const fd = fs.openSync(settings.log, "a", 0o600)
    try {
      const [cmd, ...args] = settings.command
      const child = spawn(cmd, args, {
        detached: true,
        stdio: ["ignore", fd, fd],
        env: { ...process.env, LLMEM_HOME: home },
      })
      child.on("error", (err) => {
        spawnedAt = 0
        warnOnce(`memory unavailable: cannot start sidecar ${JSON.stringify(settings.command)}: ${String(err)} (see llmem-hooks doctor)`)
      })
      child.unref()
      spawnedAt = Date.now()
      log(`started sidecar ${JSON.stringify(settings.command)} (pid ${child.pid ?? "?"})`)
    } finally {
      fs.closeSync(fd)
    }
  }

  try {
    startSidecar()
  } catch (err) {
    log(`autostart failed: ${String(err)}`)
  }

  // Started by us, or (by anyone) so recently that its pid file is young: a live sidecar
  // whose socket stays closed is not waited for on every prompt.
  const sidecarStarting = (): boolean => {
    if (spawnedAt > 0 && Date.now() - spawnedAt < STARTING_MS) return true
    try {
      const age = Date.now() - fs.statSync(path.join(home, "sidecar.pid")).mtimeMs
      return age < STARTING_MS && sidecarAlive()
    } catch {
      return false
    }
  }

  // A call to the query service; a service that nobody serves restarts the sidecar (at
  // most once a minute, and only if its pid file names no live process).
  let lastRestart = Date.now()
  const ask = async (method: string, params: Record<string, Json>, timeoutMs: number): Promise<Reply> => {
    let reply = await callService(settings.socket, method, params, timeoutMs)
    // A cold start: the sidecar we (or another client) just started has not opened its
    // socket yet (ENOENT / ECONNREFUSED). Wait for it a little instead of answering nothing.
    const waitUntil = Date.now() + SOCKET_WAIT_MS
    while (!reply.ok && reply.unreachable && Date.now() < waitUntil && sidecarStarting()) {
      await sleep(SOCKET_POLL_MS)
      reply = await callService(settings.socket, method, params, timeoutMs)
    }
    if (!reply.ok && reply.unreachable && Date.now() - lastRestart > RESTART_EVERY_MS) {
      lastRestart = Date.now()
      try {
        startSidecar()
      } catch (err) {
        log(`restart failed: ${String(err)}`)
      }
    }
    return reply
  }

  // The recall block for a new user message ("" = none); the same block again when the
  // same message is handled twice, so a replay carries the same bytes.
  const recallFor = async (sid: string, messageID: string, prompt: string): Promise<string> => {
    const known = messageID ? replays.get(messageID) : undefined
    if (known !== undefined) return known
    const t0 = Date.now()
    // A session's first prompt, before the sidecar wrote its context file: `start` answers
    // both, the context (kept for the system prompt) and the recall block without it.
    const first = !pinned.has(sid) && !started.has(sid) && !waited.has(sid)
      && (await readCached(path.join(settings.context_dir, `${sid}.md`))) === null
    const reply = await ask(
      first ? "start" : "recall",
      { session_id: sid, prompt: prompt.slice(0, RECALL_PROMPT_CHARS), directory: pluginInput?.directory ?? process.cwd() },
      settings.recall_timeout_ms,
    )
    if (first && reply.ok && isObject(reply.result) && typeof reply.result.context === "string") {
      started.set(sid, reply.result.context)
      if (started.size > REPLAYS_KEPT) started.delete(started.keys().next().value as string)
    }
    let block = ""
    if (reply.ok && isObject(reply.result) && typeof reply.result.block === "string") {
      block = sealRecall(reply.result.block)
      if (!block && reply.result.block.trim()) log(`recall ${sid}: a block not shaped as ours was dropped`)
    } else if (!reply.ok) {
      log(`recall ${sid}: ${reply.error} (${Date.now() - t0} ms)`)
      if (reply.unreachable) warnOnce(`memory unavailable: no sidecar answers on ${settings.socket}; run \`llmem-hooks doctor\``)
    }
    if (messageID) {
      replays.set(messageID, block)
      if (replays.size > REPLAYS_KEPT) replays.delete(replays.keys().next().value as string)
    }
    return block
  }

  const tools = async (): Promise<Record<string, ToolDefinition>> => {
    let z: SchemaBuilder | null = null
    try {
      const mod = (await import("@opencode-ai/plugin/tool")) as { tool?: { schema?: unknown } }
      if (isObject(mod.tool?.schema) || typeof mod.tool?.schema === "function") z = mod.tool?.schema as SchemaBuilder
    } catch {
      // not installed next to the plugin: plain JSON Schema below
    }
    const out: Record<string, ToolDefinition> = {}
    const { specs, problem } = loadToolSpecs()
    if (problem) log(problem)
    for (const [name, spec] of Object.entries(specs ?? {})) {
      out[name] = {
        description: spec.description,
        args: toolArgs(spec.args, z),
        execute: async (args: Record<string, unknown>, ctx: ToolContext): Promise<string> => {
          try {
            const params = toolParams(name, args, spec.args)
            if (name === "memory_remember") {
              params.agent = "opencode"
              if (ctx?.sessionID) params.session_id = ctx.sessionID
            }
            if (WITH_DIRECTORY.has(spec.method)) params.directory = ctx?.directory ?? pluginInput?.directory ?? null
            const reply = await ask(spec.method, params, settings.tool_timeout_ms)
            if (reply.ok) {
              const r = reply.result
              if (spec.method === "remember" && isObject(r) && r.status === "rejected")
                throw new ToolFailure(`Not stored: ${oneLine(r.reason ?? "not accepted")}; rephrase it as one self-contained statement`)
              if (spec.method === "get" && isObject(r) && Array.isArray(r.missing) && r.missing.length && !LIST_KEYS.some((k) => Array.isArray(r[k]) && (r[k] as Json[]).length))
                throw new ToolFailure(`Not found: ${r.missing.map((m) => (isObject(m) ? String(m.id) : String(m))).join(", ")}; find ids with memory_search`)
              return renderResult(spec.method, r)
            }
            log(`${name}: ${reply.error}`)
            if (reply.unreachable) return "llmem memory service is not running (it starts with `llmem-hooks run`); no result"
            if (reply.error.startsWith("not_found: "))
              throw new ToolFailure(`Not found: ${oneLine(reply.error.slice(11))}; find ids with memory_search`)
            throw new ToolFailure(`llmem ${spec.method} failed: ${oneLine(reply.error)}`)
          } catch (err) {
            if (err instanceof ToolFailure) throw err
            log(`${name}: ${String(err)}`)
            return `llmem ${spec.method} failed`
          }
        },
      } as unknown as ToolDefinition
    }
    return out
  }

  const hooks: Hooks = {
    event: async ({ event }) => {
      try {
        if (event.type === "session.created") {
          const info = event.properties.info
          if (info.parentID && info.id !== info.parentID) parents.set(info.id, info.parentID)
        } else if (event.type === "session.deleted") {
          const sid = event.properties.info.id
          parents.delete(sid)
          waited.delete(sid)
          pinned.delete(sid)
          started.delete(sid)
          cache.delete(path.join(settings.context_dir, `${sid}.md`))
        } else if (event.type === "session.compacted") {
          // the history was rewritten: the next request may carry the current context file
          pinned.delete(event.properties.sessionID)
        }
      } catch (err) {
        log(`event ${event?.type}: ${String(err)}`)
      }
    },

    "experimental.chat.system.transform": async (input, output) => {
      try {
        const sid = input.sessionID
        if (!sid || !SESSION_ID.test(sid)) return
        const root = rootSession(sid)
        if (!SESSION_ID.test(root)) return
        if (isObject(output) && Array.isArray(output.system) && output.system.some((s) => typeof s === "string" && s.trimStart().startsWith(TITLE_PROMPT))) return
        let text: string | null | undefined = pinned.get(root)
        if (text === undefined) {
          text = await contextFor(root)
          if (text !== null) pinned.set(root, text)
        }
        if (text !== null) output.system.push(text)
      } catch (err) {
        log(`system.transform ${input?.sessionID}: ${String(err)}`)
      }
    },

    "chat.message": async (input, output) => {
      try {
        if (!settings.recall) return
        const sid = input?.sessionID
        if (!sid || !SESSION_ID.test(sid) || !isObject(output) || !Array.isArray(output.parts)) return
        const prompt = promptText(output.parts)
        if (!prompt || prompt.includes("<llmem-recall>")) return
        const messageID = typeof output.message?.id === "string" ? output.message.id : ""
        const block = await recallFor(rootSession(sid), messageID, prompt)
        if (!block.trim()) return
        output.parts.push({
          id: nextPartId(output.parts),
          sessionID: sid,
          messageID,
          type: "text",
          text: block,
          synthetic: true,
          metadata: { llmem: "recall" },
        })
      } catch (err) {
        log(`chat.message ${input?.sessionID}: ${String(err)}`)
      }
    },

    "tool.execute.after": async (input, output) => {
      try {
        if (!settings.recall) return
        const sid = input?.sessionID
        if (!sid || !SESSION_ID.test(sid) || !isObject(output) || typeof output.output !== "string") return
        const files = toolFiles(String(input?.tool ?? ""), (input as { args?: unknown })?.args)
        const blocks: string[] = []
        const directory = pluginInput?.directory ?? process.cwd()
        for (const file of files) {
          const t0 = Date.now()
          const params = { session_id: rootSession(sid), path: file, directory, agent: "opencode" }
          const reply = await callService(settings.socket, "file_recall", params, settings.recall_timeout_ms)
          if (!reply.ok) {
            log(`file recall ${sid}: ${reply.error} (${Date.now() - t0} ms)`)
            if (reply.unreachable) break
            continue
          }
          const r = reply.result
          const block = isObject(r) && typeof r.block === "string" ? sealRecall(r.block) : ""
          if (block) blocks.push(block)
        }
        if (blocks.length) output.output = `${output.output}\n\n${blocks.join("\n\n")}`
      } catch (err) {
        log(`tool.execute.after ${input?.sessionID}: ${String(err)}`)
      }
    },

    "experimental.session.compacting": async (input, output) => {
      try {
        const sid = input.sessionID
        if (!sid || !SESSION_ID.test(sid)) return
        const file = path.join(settings.context_dir, `${sid}.compact.md`)
        let text = await readCached(file)
        if (text === null && settings.wait_ms > 0) {
          await waitFor(file, settings.wait_ms)
          text = await readCached(file)
        }
        if (text !== null) output.context.push(text)
      } catch (err) {
        log(`session.compacting ${input?.sessionID}: ${String(err)}`)
      }
    },
  }
  if (settings.tools) {
    try {
      hooks.tool = await tools()
    } catch (err) {
      log(`tools not registered: ${String(err)}`)
    }
  }
  return hooks
}
