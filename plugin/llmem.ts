// llmem-hooks plugin for OpenCode (tested with opencode-ai 1.18.33).
//
// * experimental.chat.system.transform: appends <context_dir>/<sessionID>.md (written by the
//   `llmem-hooks run` sidecar when the session is created) to the system prompt as one extra
//   string. Sub-agent sessions use their parent's file. On a session's first call a missing
//   file is waited for (up to wait_ms), later calls never wait. Content is cached by mtime.
// * experimental.session.compacting: pushes the resume pack <sessionID>.compact.md into the
//   compaction prompt.
// * At start: launches the sidecar (detached) unless one is running.
//
// Settings come from <LLMEM_HOME>/plugin.json (written by `llmem-hooks install opencode`),
// LLMEM_HOME being $LLMEM_HOME or ~/.config/llmem. The plugin never throws into OpenCode and
// never prints; problems go to the log file. It only reads memory, it never writes it.
//
// OpenCode requires every export of a plugin module to be a plugin function, so the helpers
// below stay module-private.
import type { Plugin } from "@opencode-ai/plugin"
import { spawn } from "node:child_process"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"

type Settings = {
  context_dir: string
  wait_ms: number
  autostart: boolean
  command: string[]
  log: string
}

type Cached = { mtimeMs: number; size: number; text: string }

const POLL_MS = 20
const SESSION_ID = /^[A-Za-z0-9_-]{1,256}$/
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
    const cmd = source.command
    if (Array.isArray(cmd) && cmd.length > 0 && cmd.every((c) => typeof c === "string" && c)) {
      settings.command = cmd as string[]
    }
  }
  return { settings, problem }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export const LlmemPlugin: Plugin = async (_input, options) => {
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

  const parents = new Map<string, string>() // child session -> parent session
  const cache = new Map<string, Cached>() // file path -> content at mtime
  const waited = new Set<string>() // sessions whose context file has been waited for once
  const pending = new Map<string, Promise<void>>() // first-call waits in progress

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
      child.on("error", (err) => log(`cannot start sidecar ${JSON.stringify(settings.command)}: ${String(err)}`))
      child.unref()
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

  return {
    event: async ({ event }) => {
      try {
        if (event.type === "session.created") {
          const info = event.properties.info
          if (info.parentID && info.id !== info.parentID) parents.set(info.id, info.parentID)
        } else if (event.type === "session.deleted") {
          const sid = event.properties.info.id
          parents.delete(sid)
          waited.delete(sid)
          cache.delete(path.join(settings.context_dir, `${sid}.md`))
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
        const text = await contextFor(root)
        if (text !== null) output.system.push(text)
      } catch (err) {
        log(`system.transform ${input?.sessionID}: ${String(err)}`)
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
}
