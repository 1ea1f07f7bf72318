/** Who a verified credential says the client is (docs/config.md "Data-plane auth"). */
export interface Principal {
  /** The token's `sub`, or the api key's `subject`; absent when a token has none. */
  readonly subject: string | undefined
  readonly scopes: ReadonlyArray<string>
}
