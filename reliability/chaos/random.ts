/** A seeded PRNG (mulberry32): the chaos schedule and the clients' choices replay from a seed. */
export const seededRandom = (seed: number): (() => number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export const pick = <A>(random: () => number, items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]!

/** A duration between `min` and `max` ms. */
export const between = (random: () => number, min: number, max: number): number => Math.round(min + random() * (max - min))
