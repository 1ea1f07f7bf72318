// A test CA made with openssl, and certificates it signed for localhost and 127.0.0.1, for the
// TLS end-to-end tests (docs/deploy.md "TLS"). Each lives in its own temporary directory.
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface TestCa {
  /** A file in the CA's directory: `ca.pem`, `<name>.pem`, `<name>.key`. */
  readonly file: (name: string) => string
  readonly remove: () => void
}

/** The CA, and one certificate per name ("a", "b", ...), each with its key; serials 1001, 1002, ... */
export const makeTestCa = (names: ReadonlyArray<string>): TestCa => {
  const dir = mkdtempSync(join(tmpdir(), "pinboard-tls-"))
  const file = (name: string) => join(dir, name)
  const openssl = (...args: Array<string>) => execFileSync("openssl", args, { stdio: "pipe" })
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", file("ca.key"), "-out", file("ca.pem"), "-days", "2", "-subj", "/CN=Pinboard test CA")
  writeFileSync(file("san.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
  names.forEach((name, i) => {
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", file(`${name}.key`), "-out", file(`${name}.csr`), "-subj", "/CN=localhost")
    openssl("x509", "-req", "-in", file(`${name}.csr`), "-CA", file("ca.pem"), "-CAkey", file("ca.key"), "-set_serial", String(1001 + i), "-days", "2", "-extfile", file("san.ext"), "-out", file(`${name}.pem`))
  })
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) }
}
