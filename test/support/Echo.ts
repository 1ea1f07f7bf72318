// What the fixture worker (test/fixtures/worker.mjs) answers on /echo and /upload: the request as it received it.
export interface Echo {
  readonly worker: string
  readonly method: string
  readonly url: string
  readonly headers: Record<string, string | Array<string>>
  readonly rawHeaders: Array<string>
  readonly bodyBytes: number
  readonly bodySha256: string
}
