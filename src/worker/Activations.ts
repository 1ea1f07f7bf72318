// The worker's activations (docs/worker.md): one live activation per id, made on the first request
// Pinboard sends for it, replaced when a request arrives with a newer epoch, evicted (and its
// placement released at its epoch) after an idle spell, wound down when Pinboard asks, and
// dropped all at once when the lease can no longer be trusted. Requests, open WebSockets and
// background tasks all count as use: an activation with any of them is never idle. Plain
// Promises: the worker's Effect side (Worker.ts, WindDown.ts) keeps the time.
import type { WebSocket } from "ws"
import type { Caller } from "./Call.js"
import type { ActivationContext, CallInstance, DeactivateReason, InstanceDefinition } from "./Definition.js"
import { DEFAULT_IDLE_TIMEOUT_MS } from "./Definition.js"
import { compareEpochs } from "../contract/Epochs.js"
import type { PlacementRef, WindDownEntry } from "./RegistryClient.js"

export interface ActivationsOptions {
  readonly worker: string
  /** The worker's clock (Clock's time, so TestClock drives eviction). */
  readonly now: () => number
  /** Releases a placement at its epoch (registry `POST /registry/release`). */
  readonly release: (placement: PlacementRef, epoch: string) => Promise<unknown>
  /** `call` on behalf of an instance. */
  readonly callAs: (caller: Caller) => CallInstance
  readonly log: (message: string, error?: unknown) => void
}

/**
 * How long a released epoch is remembered: past it, no attestation for that epoch is still
 * valid (60 s, plus clock tolerance).
 */
export const RELEASED_MEMORY_MS = 70_000

/** Idle evictions release their placements this many at a time, not one connection each at once. */
const RELEASES_AT_ONCE = 8

/** Runs `f` over `items`, at most `width` at a time. */
const inTurns = async <A>(items: ReadonlyArray<A>, width: number, f: (item: A) => Promise<unknown>): Promise<void> => {
  let next = 0
  const lane = async () => {
    while (next < items.length) await f(items[next++]!)
  }
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane))
}

/** Why a request gets no activation. */
export type Refusal = "lease-unhealthy" | "released"

/** A request's placement as Pinboard attested it, and the hostname it came through. */
export interface AttestedPlacement extends PlacementRef {
  readonly epoch: string
  readonly hostname: string | undefined
}

/** An activation Pinboard wants back, and by when (Pinboard's clock, ms since the epoch). */
export interface WindingDown {
  readonly activation: Activation
  readonly deadline: number
}

export class Activation {
  /** Requests in progress, open WebSockets and background tasks. */
  uses = 0
  lastUsedAt: number
  windingDown = false
  closing: Promise<void> | undefined
  readonly sockets = new Set<WebSocket>()
  state: unknown
  ready!: Promise<unknown>

  constructor(
    readonly key: string,
    readonly definition: InstanceDefinition<unknown>,
    readonly context: ActivationContext,
    /** Aborts `context.signal`: the activation is being torn down. */
    readonly controller: AbortController,
    now: number
  ) {
    this.lastUsedAt = now
  }

  get epoch(): string {
    return this.context.epoch
  }
}

export class Activations {
  private readonly live = new Map<string, Activation>()
  /** The epoch each recently released id was released at: a request at it or older is refused. */
  private readonly released = new Map<string, { readonly epoch: string; readonly at: number }>()

  constructor(
    private readonly definitions: ReadonlyMap<string, InstanceDefinition<unknown>>,
    private readonly options: ActivationsOptions
  ) {}

  get size(): number {
    return this.live.size
  }

  /** The live activation of an id (in `env`, in hostname-aware mode), if any (for tests and introspection). */
  find(namespace: string, id: string, env = ""): Activation | undefined {
    return this.live.get(keyOf({ env, namespace, id }))
  }

  /**
   * The activation for a request attested at `epoch`, counted as in use until `leave`; or why
   * there is none and none may be made: the lease (`mayActivate` says no), or this worker
   * released the id at that epoch already (the request was sent before the release landed).
   * Either way the request is refused, so that Pinboard places the id anew.
   */
  async enter(target: AttestedPlacement, mayActivate: (placement: PlacementRef) => boolean): Promise<Activation | Refusal> {
    const key = keyOf(target)
    const { epoch } = target
    for (;;) {
      const current = this.live.get(key)
      if (current?.closing !== undefined) {
        await current.closing
        continue
      }
      if (current !== undefined && compareEpochs(epoch, current.epoch) > 0) {
        await this.teardown(current, "replaced", false)
        continue
      }
      if (current !== undefined) {
        current.uses++
        await current.ready.catch((error: unknown) => {
          this.leave(current)
          throw error
        })
        return current
      }
      if (!mayActivate(target)) return "lease-unhealthy"
      if (this.releasedAtOrAfter(key, epoch)) return "released"
      const activation = this.create(key, target)
      activation.uses++
      await activation.ready.catch((error: unknown) => {
        this.leave(activation)
        throw error
      })
      return activation
    }
  }

  leave(activation: Activation): void {
    activation.uses--
    activation.lastUsedAt = this.options.now()
  }

  /** Evicts activations idle for their definition's timeout, releasing each at its epoch. */
  sweepIdle(): Promise<unknown> {
    const now = this.options.now()
    for (const [key, { at }] of this.released) if (now - at >= RELEASED_MEMORY_MS) this.released.delete(key)
    const idle = [...this.live.values()].filter(
      (a) =>
        a.closing === undefined &&
        a.uses === 0 &&
        now - a.lastUsedAt >= (a.definition.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS)
    )
    return inTurns(idle, RELEASES_AT_ONCE, (a) => this.teardown(a, "idle", true))
  }

  /**
   * The activations of the placements Pinboard listed for wind-down: those live here at the
   * listed epoch and not already ending, now marked as winding down.
   */
  startWindDown(entries: ReadonlyArray<WindDownEntry>): Array<WindingDown> {
    const started: Array<WindingDown> = []
    for (const entry of entries) {
      const activation = this.live.get(keyOf(entry))
      if (activation === undefined || activation.epoch !== entry.epoch || activation.windingDown || activation.closing) continue
      activation.windingDown = true
      started.push({ activation, deadline: entry.deadline })
    }
    return started
  }

  /** Deactivates a wound-down activation (its hook done or out of time) and releases its placement. */
  endWindDown(activation: Activation): Promise<void> {
    return this.teardown(activation, "wind-down", true)
  }

  /** Tears every activation down (lease lost or unhealthy, shutdown); nothing is released. */
  dropAll(reason: DeactivateReason): Promise<unknown> {
    return this.dropWhere(() => true, reason)
  }

  /** Tears down the activations whose placement `which` accepts; nothing is released. */
  dropWhere(which: (placement: PlacementRef) => boolean, reason: DeactivateReason): Promise<unknown> {
    const chosen = [...this.live.values()].filter((a) => which(a.context))
    return Promise.all(chosen.map((a) => this.teardown(a, reason, false)))
  }

  private create(key: string, target: AttestedPlacement): Activation {
    const { env, namespace, id, epoch, hostname } = target
    const definition = this.definitions.get(namespace)
    if (definition === undefined) throw new Error(`no instance definition for ${namespace}`)
    const controller = new AbortController()
    let activation: Activation
    const context: ActivationContext = {
      env,
      namespace,
      id,
      epoch,
      hostname,
      worker: this.options.worker,
      signal: controller.signal,
      background: (task) => {
        activation.uses++
        Promise.resolve()
          .then(() => task(controller.signal))
          .catch((error: unknown) => {
            if (!controller.signal.aborted) this.options.log(`background task of ${key} failed`, error)
          })
          .finally(() => this.leave(activation))
      },
      call: this.options.callAs({ worker: this.options.worker, env, namespace, id, epoch, depth: 0, hostname })
    }
    activation = new Activation(key, definition, context, controller, this.options.now())
    activation.ready = Promise.resolve()
      .then(() => definition.activate(context))
      .then((state) => (activation.state = state))
    activation.ready.catch((error: unknown) => {
      this.options.log(`activate of ${key} failed`, error)
      void this.teardown(activation, "failed", true)
    })
    this.live.set(key, activation)
    return activation
  }

  private releasedAtOrAfter(key: string, epoch: string): boolean {
    const released = this.released.get(key)
    return released !== undefined && compareEpochs(epoch, released.epoch) <= 0
  }

  private teardown(activation: Activation, reason: DeactivateReason, release: boolean): Promise<void> {
    if (release && activation.closing === undefined) {
      this.released.set(activation.key, { epoch: activation.epoch, at: this.options.now() })
    }
    activation.closing ??= (async () => {
      activation.controller.abort()
      for (const socket of activation.sockets) socket.close(1012, "activation ended")
      const state = await activation.ready.then(
        (state) => ({ state }),
        () => undefined
      )
      if (state !== undefined && activation.definition.deactivate !== undefined) {
        try {
          await activation.definition.deactivate(state.state, reason, activation.context)
        } catch (error) {
          this.options.log(`deactivate of ${activation.key} failed`, error)
        }
      }
      if (this.live.get(activation.key) === activation) this.live.delete(activation.key)
      if (release) {
        await this.options.release(activation.context, activation.epoch).catch((error: unknown) => {
          this.options.log(`release of ${activation.key} at epoch ${activation.epoch} failed`, error)
        })
      }
    })()
    return activation.closing
  }
}

/** Envs and namespaces hold no space. */
const keyOf = (placement: PlacementRef): string => `${placement.env} ${placement.namespace} ${placement.id}`
