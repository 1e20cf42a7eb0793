/**
 * Attach or start: the extension uses the configured server when its `/api/health`
 * answers, and otherwise starts `python -m kernelscope.server` (what `kernelscope serve` runs) with the
 * configured Python on a free loopback port, waits for its health, and stops it when the
 * extension deactivates. Every failure becomes a message that says how to fix it.
 * No vscode here: the caller passes settings and a log function.
 */

import { ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { Health, KernelscopeClient } from "./client";

export interface ServerSettings {
  /** Tried first; "" skips straight to starting one. */
  serverUrl: string;
  /** The interpreter that has the kernelscope package (and torch) installed. */
  python: string;
  /** Start a server when none answers. */
  autoStart: boolean;
  /** Working directory for the started server (a workspace folder), if any. */
  cwd?: string;
  /** Extra environment, e.g. PYTHONPATH for a checkout that is not installed. */
  env?: Record<string, string>;
  /** How long a started server may take to answer health. */
  startTimeoutMs?: number;
}

/** A failure the user can fix; `fix` says how. */
export class SetupError extends Error {
  constructor(message: string, readonly fix: string) {
    super(message);
  }
}

/** Checks the interpreter before starting a server, so a missing piece is named. */
const PREFLIGHT = `
import importlib.util as u, json, sys
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3],
  "server": u.find_spec("kernelscope") is not None and u.find_spec("kernelscope.server") is not None,
  "flask": u.find_spec("flask") is not None, "torch": u.find_spec("torch") is not None}))
`;

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv }, timeoutMs: number):
  Promise<{ code: number | null; stdout: string; stderr: string; error?: NodeJS.ErrnoException }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...opts, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", (error) => { clearTimeout(timer); resolve({ code: null, stdout, stderr, error }); });
    child.on("close", (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

export class ServerManager {
  private child: ChildProcess | null = null;
  private started: { url: string; settings: ServerSettings } | null = null;
  private pending: Promise<KernelscopeClient> | null = null;
  private log: (line: string) => void;

  constructor(log: (line: string) => void = () => {}) {
    this.log = log;
  }

  /** The URL of a server this manager started, if it is running. */
  get startedUrl(): string | null {
    return this.child && this.child.exitCode === null ? this.started?.url ?? null : null;
  }

  /** The process id of that server (the leader of its process group), if it is running. */
  get startedPid(): number | null {
    return this.child && this.child.exitCode === null ? this.child.pid ?? null : null;
  }

  /** A client for a server that answers health: the configured one, or one started now. */
  ensure(settings: ServerSettings): Promise<KernelscopeClient> {
    this.pending ??= this.attachOrStart(settings).finally(() => { this.pending = null; });
    return this.pending;
  }

  private async attachOrStart(settings: ServerSettings): Promise<KernelscopeClient> {
    if (settings.serverUrl) {
      const client = new KernelscopeClient(settings.serverUrl);
      if (await answers(client)) {
        this.log(`attached to ${settings.serverUrl}`);
        return client;
      }
    }
    if (this.startedUrl) {
      const client = new KernelscopeClient(this.startedUrl);
      if (await answers(client)) return client;
    }
    if (!settings.autoStart) {
      throw new SetupError(`No Kernelscope server answers at ${settings.serverUrl || "(no URL set)"}.`,
        "Start one with `kernelscope serve`, set kernelscope.serverUrl to it, or turn on kernelscope.startServer.");
    }
    return this.start(settings);
  }

  private async start(settings: ServerSettings): Promise<KernelscopeClient> {
    const env = { ...process.env, ...settings.env };
    const pre = await run(settings.python, ["-c", PREFLIGHT], { cwd: settings.cwd, env }, 30_000);
    if (pre.error) {
      throw new SetupError(`Python was not found: ${settings.python} (${pre.error.code ?? pre.error.message}).`,
        "Set kernelscope.pythonPath to a Python 3.11+ interpreter that has Kernelscope installed (bash scripts/setup.sh).");
    }
    let info: { python: string; server: boolean; flask: boolean; torch: boolean };
    try {
      info = JSON.parse(pre.stdout.trim().split("\n").pop() ?? "");
    } catch {
      throw new SetupError(`${settings.python} did not run (${(pre.stderr || pre.stdout).trim().slice(-300)}).`,
        "Set kernelscope.pythonPath to a working Python 3.11+ interpreter.");
    }
    const [major, minor] = info.python.split(".").map(Number);
    if (major < 3 || (major === 3 && minor < 11)) {
      throw new SetupError(`${settings.python} is Python ${info.python}; Kernelscope needs 3.11 or newer.`,
        "Set kernelscope.pythonPath to a Python 3.11+ interpreter.");
    }
    if (!info.server || !info.flask) {
      throw new SetupError(`The Kernelscope package is not installed for ${settings.python}.`,
        "Run `bash scripts/setup.sh` in a Kernelscope checkout (or `pip install -e <checkout>`) with that Python, or set kernelscope.pythonPath to the interpreter that has it.");
    }
    if (!info.torch) {
      throw new SetupError(`PyTorch is not installed for ${settings.python}.`,
        "Run `bash scripts/setup.sh` (it installs torch and Triton) with that Python.");
    }
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    // -P: the working directory (the user's workspace) is not put on sys.path, so a project
    // of the user's own cannot shadow Kernelscope's packages.
    const args = ["-P", "-m", "kernelscope.server", "--host", "127.0.0.1", "--port", String(port)];
    this.log(`starting ${settings.python} ${args.join(" ")}`);
    // Its own process group, so stopping it also stops what it starts (WSGI workers, pools).
    const child = spawn(settings.python, args, { cwd: settings.cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    this.child = child;
    this.started = { url, settings };
    let output = "";
    const keep = (d: Buffer) => {
      output = (output + d.toString()).slice(-4000);
      for (const line of d.toString().split("\n")) if (line.trim()) this.log(`server: ${line}`);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    let gone = false;
    child.on("exit", () => { gone = true; });
    const exited = new Promise<never>((_, reject) => {
      child.on("error", (e) => reject(new SetupError(`could not start the server: ${e.message}`, "Check kernelscope.pythonPath.")));
      child.on("exit", (code, signal) => reject(new SetupError(
        `The Kernelscope server exited at start (${signal ?? `exit ${code}`}): ${output.trim().split("\n").slice(-3).join(" | ")}`,
        "Run `python -m kernelscope.server` in a terminal to see the whole error.")));
    });
    const client = new KernelscopeClient(url);
    const deadline = Date.now() + (settings.startTimeoutMs ?? 60_000);
    const healthy = (async () => {
      while (Date.now() < deadline && !gone) {
        if (await answers(client, 1000)) return client;
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new SetupError(`The Kernelscope server at ${url} did not answer /api/health in time.`,
        "Run `python -m kernelscope.server` in a terminal to see what it does at start.");
    })();
    try {
      await Promise.race([healthy, exited]);
    } catch (err) {
      this.stop();
      throw err;
    }
    exited.catch(() => {}); // a later exit is noticed by the next health check
    this.log(`started ${url}`);
    return client;
  }

  /** Stops the server this manager started and its process group (SIGTERM, then SIGKILL
   * after 5 s for whatever is left of the group). */
  stop(): void {
    const child = this.child;
    this.child = null;
    if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
    const group = (signal: NodeJS.Signals) => {
      try { process.kill(-child.pid!, signal); } catch { /* already gone */ }
    };
    group("SIGTERM");
    const timer = setTimeout(() => group("SIGKILL"), 5000);
    timer.unref();
  }
}

async function answers(client: KernelscopeClient, timeoutMs = 1500): Promise<Health | null> {
  try {
    const h = await client.health(timeoutMs);
    return h && h.ok !== false ? h : null;
  } catch {
    return null;
  }
}

/** The device to ask for: the setting, or cuda when the server has a GPU ("auto"). */
export async function chooseDevice(client: KernelscopeClient, setting: string): Promise<string> {
  const health = await client.health().catch(() => null);
  const cuda = health?.devices?.cuda === true;
  if (setting === "cuda" && !cuda) {
    throw new SetupError(`The Kernelscope server at ${client.base} has no CUDA GPU${health?.devices?.gpu === undefined ? "" : ""}.`,
      "Set kernelscope.device to \"cpu\" (C++ kernels, or Triton under its interpreter), or point kernelscope.serverUrl at a server on a GPU host.");
  }
  if (setting === "auto") return cuda ? "cuda" : "cpu";
  return setting;
}
