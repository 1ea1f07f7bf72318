// A seeded PRNG (sfc32, seeded through splitmix32) and the draws the fuzz and chaos runs use, so that
// `--seed S` replays a run's inputs exactly (their order across the concurrent senders aside).

const splitmix32 = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x9e3779b9) >>> 0
    let z = a
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0
    return (z ^ (z >>> 16)) >>> 0
  }
}

export class Rng {
  private a: number
  private b: number
  private c: number
  private d: number

  constructor(seed: number) {
    const mix = splitmix32(seed)
    this.a = mix()
    this.b = mix()
    this.c = mix()
    this.d = mix()
    for (let i = 0; i < 12; i++) this.next()
  }

  /** A uniform 32-bit unsigned integer. */
  next(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0
    this.d = (this.d + 1) >>> 0
    this.a = this.b ^ (this.b >>> 9)
    this.b = (this.c + (this.c << 3)) >>> 0
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0
    this.c = (this.c + t) >>> 0
    return t
  }

  /** A float in [0, 1). */
  float(): number {
    return this.next() / 4294967296
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.float() * n)
  }

  /** An integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1)
  }

  chance(p: number): boolean {
    return this.float() < p
  }

  pick<A>(items: ReadonlyArray<A>): A {
    if (items.length === 0) throw new Error("pick from an empty list")
    return items[this.int(items.length)]!
  }

  /** A pick by weight: `[[weight, value], ...]`. */
  weighted<A>(items: ReadonlyArray<readonly [number, A]>): A {
    let total = 0
    for (const [w] of items) total += w
    let r = this.float() * total
    for (const [w, value] of items) {
      r -= w
      if (r < 0) return value
    }
    return items[items.length - 1]![1]
  }

  bytes(n: number): Buffer {
    const out = Buffer.allocUnsafe(n)
    for (let i = 0; i < n; i++) out[i] = this.next() & 0xff
    return out
  }

  /** `n` characters drawn from `alphabet`. */
  chars(n: number, alphabet: string): string {
    let s = ""
    for (let i = 0; i < n; i++) s += alphabet[this.int(alphabet.length)]!
    return s
  }

  /** A small length, most often short: 0..max with a bias towards the low end. */
  length(max: number): number {
    const r = this.float()
    return Math.floor(r * r * r * (max + 1))
  }

  /** A child generator, so that one input's draws do not depend on how many another made. */
  fork(): Rng {
    return new Rng(this.next())
  }
}

export const ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-"
export const TOKEN_ALPHABET = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
export const B64URL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
