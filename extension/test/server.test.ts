/** Attach or start (src/server.ts): the configured server, a started one, and the messages
 * that name the fix when Python, the package or a GPU is missing. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { KernelscopeClient } from "../src/client";
import { ServerManager, SetupError, chooseDevice, freePort } from "../src/server";
import { fakePython, fakeServer } from "./helpers";

const base = { autoStart: true, startTimeoutMs: 20_000 };

test("attaches to the configured server when its health answers, starting nothing", async () => {
  const srv = await fakeServer();
  const log: string[] = [];
  const manager = new ServerManager((l) => log.push(l));
  const client = await manager.ensure({ ...base, serverUrl: srv.url, python: "/nonexistent/python" });
  assert.equal(client.base, srv.url);
  assert.equal(manager.startedUrl, null);
  assert.ok(log.some((l) => l.includes(`attached to ${srv.url}`)));
  await srv.close();
});

test("starts a server on a free loopback port when none answers, and stops it", async () => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  const manager = new ServerManager();
  const client = await manager.ensure({ ...base, serverUrl: dead, python: fakePython() });
  assert.match(client.base, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.notEqual(client.base, dead);
  assert.equal(manager.startedUrl, client.base);
  const health = await client.health();
  assert.equal(health.ok, true);
  // A second ensure reuses it.
  assert.equal((await manager.ensure({ ...base, serverUrl: dead, python: fakePython() })).base, client.base);
  manager.stop();
  await new Promise((r) => setTimeout(r, 500));
  await assert.rejects(client.health(500));
});

test("concurrent ensures start one server", async () => {
  const manager = new ServerManager();
  const settings = { ...base, serverUrl: "", python: fakePython() };
  const [a, b] = await Promise.all([manager.ensure(settings), manager.ensure(settings)]);
  assert.equal(a.base, b.base);
  manager.stop();
});

async function setupError(settings: Record<string, unknown>, env: Record<string, string> = {}): Promise<SetupError> {
  const manager = new ServerManager();
  try {
    await manager.ensure({ ...base, serverUrl: "", python: fakePython(), env, ...settings });
  } catch (err) {
    assert.ok(err instanceof SetupError, String(err));
    return err;
  } finally {
    manager.stop();
  }
  throw new Error("ensure did not fail");
}

test("a missing Python is named, with the setting that fixes it", async () => {
  const err = await setupError({ python: "/nonexistent/python3" });
  assert.match(err.message, /Python was not found: \/nonexistent\/python3/);
  assert.match(err.fix, /kernelscope\.pythonPath/);
});

test("a missing package, an old Python, a missing torch and a crash at start are explained", async () => {
  let err = await setupError({}, { FAKE_PY_MISSING: "server" });
  assert.match(err.message, /package is not installed/);
  assert.match(err.fix, /scripts\/setup\.sh/);
  err = await setupError({}, { FAKE_PY_VERSION: "3.9.18" });
  assert.match(err.message, /needs 3\.11/);
  err = await setupError({}, { FAKE_PY_MISSING: "torch" });
  assert.match(err.message, /PyTorch is not installed/);
  err = await setupError({}, { FAKE_PY_CRASH: "1" });
  assert.match(err.message, /exited at start.*No module named 'flask'/);
});

test("no server and starting turned off says how to get one", async () => {
  const err = await setupError({ autoStart: false, serverUrl: `http://127.0.0.1:${await freePort()}` });
  assert.match(err.message, /No Kernelscope server answers/);
  assert.match(err.fix, /kernelscope serve/);
});

test("asking for cuda on a server without a GPU says to use cpu; auto picks what is there", async () => {
  const cpu = await fakeServer({ cuda: false });
  const gpu = await fakeServer({ cuda: true });
  await assert.rejects(chooseDevice(new KernelscopeClient(cpu.url), "cuda"),
    (e: unknown) => e instanceof SetupError && /no CUDA GPU/.test(e.message) && /"cpu"/.test(e.fix));
  assert.equal(await chooseDevice(new KernelscopeClient(cpu.url), "auto"), "cpu");
  assert.equal(await chooseDevice(new KernelscopeClient(gpu.url), "auto"), "cuda");
  assert.equal(await chooseDevice(new KernelscopeClient(gpu.url), "cpu"), "cpu");
  await cpu.close();
  await gpu.close();
});

// The real `python -m kernelscope.server` is started by test/e2e.test.ts.
