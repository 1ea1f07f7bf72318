/** Who a verified credential says the client is (DESIGN 6). */
export interface Principal {
  /** The token's `sub`, or the api key's `subject`; absent when a token has none. */
  readonly subject: string | undefined
  readonly scopes: ReadonlyArray<string>
}
