/**
 * After `done`: the stages the server still runs for the trace (its follow-ups, Inductor;
 * docs/server.md, "Follow-ups"). `done.follow_ups` lists them, the job's stream has ended,
 * and their events go to the stored trace only, so the host asks
 * `GET /api/traces/<id>/follow-ups` every `pollMs` while one is still running, adds each
 * event stored after `done` to the result, and says what changed. What counts as still
 * running is the web UI's rule (webui/js/trace.js `followUpsPending`, from the states the
 * server gives); the watch also ends at `done.follow_ups_until` (the server's "stored by
 * then"), and what is still running then is "lost", as the server itself would say.
 * No vscode here.
 */

import type { KernelscopeClient } from "./client";
import type { StageEvent } from "./protocol";
import type { CompileResult } from "./result";

/** Past `follow_ups_until` (the server's clock), one more answer is awaited for this long:
 * what the two clocks may differ by, and the last write. */
export const FOLLOW_UP_SLACK_MS = 5000;

export interface FollowUpWatch {
  /** Called after each answer with the events that are new to the result (lines mapped). */
  onUpdate(states: Record<string, string>, events: StageEvent[]): void;
  /** Rewrites a stored event as the stream's events were (the selection's line map). */
  map?: (event: StageEvent) => StageEvent;
  signal?: AbortSignal;
  pollMs?: number;
  /** Milliseconds since the epoch (the deadline is in Unix seconds). */
  now?: () => number;
}

const sleep = (ms: number, signal?: AbortSignal) => new Promise<void>((resolve) => {
  if (signal?.aborted) return resolve();
  const timer = setTimeout(done, ms);
  function done() {
    clearTimeout(timer);
    signal?.removeEventListener("abort", done);
    resolve();
  }
  signal?.addEventListener("abort", done);
});

/** Polls until no follow-up of `result` is running, its deadline passes, or `signal` aborts. */
export async function watchFollowUps(client: KernelscopeClient, result: CompileResult, watch: FollowUpWatch): Promise<void> {
  const { signal, pollMs = 1000, now = Date.now, map = (e: StageEvent) => e } = watch;
  const id = result.traceId;
  const until = result.trace.done?.follow_ups_until;
  const deadline = typeof until === "number" ? until * 1000 + FOLLOW_UP_SLACK_MS : Infinity;
  while (id && result.followUpsPending()) {
    await sleep(pollMs, signal);
    if (signal?.aborted) return;
    const late = now() > deadline;
    let events: StageEvent[] = [];
    try {
      const answer = await client.followUps(id, signal);
      events = (answer.events ?? []).map(map).filter((e) => result.add(e));
      result.setFollowUps(answer.follow_ups ?? {});
    } catch {
      // No answer (the server may be restarting): ask again next time, until the deadline.
      if (signal?.aborted) return;
      if (!late) continue;
    }
    if (late) result.loseFollowUps();
    watch.onUpdate(result.followUpStates(), events);
  }
}
