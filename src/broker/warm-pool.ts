import type { LaunchPlan } from "../policy/plan.js";
import { WorkerProcess } from "./worker-process.js";

/** Workers are planned per effect of the ops they serve: a read-only sandbox for reads, the session's mode for writes. */
export type PlanKey = "read" | "write";

/**
 * The warm pool: workers started ahead of time, per plan key, for the current
 * generation, so that an op need not wait for Node to start in a sandbox. A
 * worker that dies while it waits leaves the pool; a policy change or close
 * drains it (the broker waits for the drained workers to end).
 */
export class WarmPool {
  private readonly idle = new Map<PlanKey, WorkerProcess[]>();

  constructor(
    private readonly size: () => number,
    private readonly planFor: (key: PlanKey) => LaunchPlan,
    private readonly generation: () => number,
    private readonly closed: () => boolean,
  ) {}

  /** Fills the pool for every key. */
  prewarm(): void {
    for (const key of ["read", "write"] as const) this.refill(key);
  }

  refill(key: PlanKey): void {
    const idle = this.idle.get(key) ?? [];
    this.idle.set(key, idle);
    while (!this.closed() && idle.length < this.size()) {
      const w = new WorkerProcess(this.planFor(key), this.generation());
      idle.push(w);
      // A warm worker that dies waiting (killed, drained) leaves the pool.
      void w.done.then(() => {
        const i = idle.indexOf(w);
        if (i >= 0) idle.splice(i, 1);
      });
    }
  }

  /** A worker from the pool if one is waiting (the caller refills it once the op is done, off the op's path), else a new one. */
  take(key: PlanKey): { worker: WorkerProcess; fromPool: boolean } {
    const w = this.idle.get(key)?.shift();
    if (w) return { worker: w, fromPool: true };
    return { worker: new WorkerProcess(this.planFor(key), this.generation()), fromPool: false };
  }

  /** Stops every waiting worker; returns their ends. */
  drain(): Promise<unknown>[] {
    const stopping: Promise<unknown>[] = [];
    for (const idle of this.idle.values()) for (const w of idle.splice(0)) (w.cancel(), stopping.push(w.done));
    return stopping;
  }
}
