// The fleet page's polls share a registry read that is under way (docs/operations.md "The fleet
// page"): several open pages cost one read at a time, and a failed read is not kept.
import { describe, expect, it } from "vitest"
import { sharedRead } from "../../src/http/FleetPage.js"

describe("sharedRead", () => {
  it("gives the calls made while a read is under way that read's result, and reads anew after it", async () => {
    let reads = 0
    let finish: (value: number) => void = () => undefined
    const read = sharedRead(() => {
      reads++
      return new Promise<number>((resolve) => (finish = resolve))
    })
    const first = read()
    const second = read()
    expect(reads).toBe(1)
    finish(41)
    expect(await Promise.all([first, second])).toEqual([41, 41])
    const third = read()
    expect(reads).toBe(2)
    finish(42)
    expect(await third).toBe(42)
  })

  it("does not keep a failed read", async () => {
    let reads = 0
    const read = sharedRead(() => (++reads === 1 ? Promise.reject(new Error("registry unavailable")) : Promise.resolve(reads)))
    await expect(read()).rejects.toThrow("registry unavailable")
    expect(await read()).toBe(2)
  })
})
